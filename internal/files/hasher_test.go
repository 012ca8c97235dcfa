package files

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
)

func TestHasher(t *testing.T) {
	t.Parallel()
	data := make([]byte, 3*syncHashLimit+5*hashPiece/2+7)
	for i := range data {
		data[i] = byte(i ^ i>>9)
	}
	for _, size := range []int{0, 1, 100, syncHashLimit, syncHashLimit + 1, 3 * syncHashLimit, len(data)} {
		for _, step := range []int{1 << 10, 32<<10 - 64, hashPiece, hashPiece + 1, 1 << 20, len(data)} {
			if size > 64<<10 && step == 1<<10 {
				continue // slow, and nothing new
			}
			t.Run(fmt.Sprintf("%d in %d", size, step), func(t *testing.T) {
				t.Parallel()
				h := newHasher()
				buf := make([]byte, step)
				for off := 0; off < size; off += step {
					n := copy(buf, data[off:min(off+step, size)])
					h.Write(buf[:n])
					clear(buf) // the caller reuses its buffer at once
				}
				want := sha256.Sum256(data[:size])
				if got := h.Sum(); got != hex.EncodeToString(want[:]) {
					t.Errorf("sha256 of %d bytes written %d at a time: %s, want %x", size, step, got, want)
				}
				h.stop() // again: nothing
			})
		}
	}
	// Stopped without a sum (an aborted write): its goroutine ends
	// (goleak in TestMain checks).
	h := newHasher()
	h.Write(data)
	h.stop()
}
