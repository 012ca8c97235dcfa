package runner

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestRetentionModel writes random amounts into retention buffers of
// various sizes and checks every retained byte against the full stream.
func TestRetentionModel(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ head, tail int64 }{{0, 100}, {10, 100}, {1000, 64 << 10}, {5, 1}, {0, 1 << 20}} {
		r := newRetention(c.head, c.tail)
		var all []byte
		for step := range 120 {
			n := rng.IntN(3000)
			if step%30 == 0 {
				n = rng.IntN(300_000)
			}
			data := make([]byte, n)
			for i := 0; i+8 <= len(data); i += 8 {
				binary.LittleEndian.PutUint64(data[i:], rng.Uint64())
			}
			r.write(data, uint64(step+1))
			all = append(all, data...)

			total, retained, omitted := r.stats()
			if total != int64(len(all)) || retained+omitted != total {
				t.Fatalf("%+v step %d: stats %d %d %d, want total %d", c, step, total, retained, omitted, len(all))
			}
			wantHead := min(c.head, total)
			wantTail := min(c.tail, total-wantHead)
			if retained != wantHead+wantTail {
				t.Fatalf("%+v step %d: retained %d, want %d", c, step, retained, wantHead+wantTail)
			}
			if retained > 200_000 && step%10 != 0 {
				continue // reading it all back every step is slow under -race
			}
			// Read everything retained from 0, through the gap.
			var got []byte
			off := int64(0)
			for off < total {
				if resume, gap := r.gap(off); gap {
					if off != wantHead || resume != total-wantTail {
						t.Fatalf("%+v step %d: gap [%d,%d), want [%d,%d)", c, step, off, resume, wantHead, total-wantTail)
					}
					off = resume
					continue
				}
				chunk := r.read(off, 1+rng.Int64N(70_000), total)
				if len(chunk) == 0 {
					t.Fatalf("%+v step %d: nothing at %d", c, step, off)
				}
				if !bytes.Equal(chunk, all[off:off+int64(len(chunk))]) {
					t.Fatalf("%+v step %d: wrong bytes at %d", c, step, off)
				}
				got = append(got, chunk...)
				off += int64(len(chunk))
			}
			if int64(len(got)) != retained {
				t.Fatalf("%+v step %d: read %d bytes, retained %d", c, step, len(got), retained)
			}
		}
	}
}

func TestRetentionMarks(t *testing.T) {
	t.Parallel()
	r := newRetention(1<<20, 1<<20)
	r.write([]byte("aaa"), 1)
	r.write([]byte("bb"), 5)
	r.write([]byte("c"), 9)
	for off, want := range map[int64]uint64{0: 1, 2: 1, 3: 5, 4: 5, 5: 9} {
		if got := r.seqAt(off); got != want {
			t.Errorf("seqAt(%d) = %d, want %d", off, got, want)
		}
	}
	for _, tc := range []struct {
		off  int64
		seq  uint64
		want int64
	}{{0, 2, 3}, {1, 7, 5}, {0, 100, 6}, {4, 5, 5}} {
		if got := r.limitBefore(tc.off, tc.seq); got != tc.want {
			t.Errorf("limitBefore(%d, %d) = %d, want %d", tc.off, tc.seq, got, tc.want)
		}
	}
}
