package files

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// patternReader yields n bytes of a repeating, not-all-zero pattern.
type patternReader struct {
	n   int64
	pos int64
}

func (r *patternReader) Read(p []byte) (int, error) {
	if r.pos >= r.n {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.n-r.pos)]
	for i := range p {
		p[i] = byte((r.pos + int64(i)) % 251)
	}
	r.pos += int64(len(p))
	return len(p), nil
}

const size256MB = 256 << 20

func BenchmarkWrite256MB(b *testing.B) {
	f, ws := newTestFS(b)
	p := filepath.Join(ws, "big")
	b.SetBytes(size256MB)
	for b.Loop() {
		if _, err := f.Write(b.Context(), p, WriteOptions{}, &patternReader{n: size256MB}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRead256MB(b *testing.B) {
	f, ws := newTestFS(b)
	p := filepath.Join(ws, "big")
	if _, err := f.Write(b.Context(), p, WriteOptions{}, &patternReader{n: size256MB}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size256MB)
	for b.Loop() {
		var n int64
		err := f.Read(b.Context(), p, 0, 0, func(c ReadChunk) error { n += int64(len(c.Data)); return nil })
		if err != nil || n != size256MB {
			b.Fatalf("read %d bytes: %v", n, err)
		}
	}
}

// benchTree is a 20,000-file source tree (80 MB), built once per test
// binary and removed by TestMain. With $AGENTD_BENCH_DIR set it is built
// there instead and kept, to compare with other tools (grep -r, rg).
var benchTree struct {
	once  sync.Once
	dir   string
	keep  bool
	bytes int64
	err   error
}

func searchTree(b *testing.B) (string, int64) {
	benchTree.once.Do(func() {
		dir := os.Getenv("AGENTD_BENCH_DIR")
		var err error
		if dir == "" {
			dir, err = os.MkdirTemp("", "agentd-bench-search-")
		} else {
			benchTree.keep = true
			err = os.MkdirAll(dir, 0o755)
		}
		if err != nil {
			benchTree.err = err
			return
		}
		benchTree.dir = dir
		rng := rand.New(rand.NewPCG(42, 42))
		words := strings.Fields("func return if else for range var const type struct interface map chan go defer select case switch " +
			"ctx err nil string int byte error fmt Println Sprintf value key index count buffer reader writer handler server client")
		var sb strings.Builder
		for i := range 20_000 {
			sb.Reset()
			for sb.Len() < 4000 {
				n := 3 + rng.IntN(10)
				sb.WriteString(strings.Repeat("\t", rng.IntN(3)))
				for w := range n {
					if w > 0 {
						sb.WriteByte(' ')
					}
					sb.WriteString(words[rng.IntN(len(words))])
				}
				sb.WriteByte('\n')
			}
			if i%1000 == 7 {
				sb.WriteString("func rareHandlerFunc(ctx context.Context) error { return nil }\n")
			}
			p := filepath.Join(dir, fmt.Sprintf("pkg%02d/sub%02d/file%05d.go", i%50, (i/50)%20, i))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				benchTree.err = err
				return
			}
			if err := os.WriteFile(p, []byte(sb.String()), 0o644); err != nil {
				benchTree.err = err
				return
			}
			benchTree.bytes += int64(sb.Len())
		}
	})
	if benchTree.err != nil {
		b.Fatal(benchTree.err)
	}
	return benchTree.dir, benchTree.bytes
}

func BenchmarkSearch20k(b *testing.B) {
	dir, total := searchTree(b)
	f, err := New(Options{Workspace: dir})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		opts SearchOptions
		want int64
	}{
		{"literal", SearchOptions{Pattern: "rareHandlerFunc", Fixed: true}, 20},
		{"regex", SearchOptions{Pattern: `func \w+Handler\w*\(`}, 20},
		{"ignorecase", SearchOptions{Pattern: "RAREHANDLERFUNC", IgnoreCase: true}, 20},
		{"many-matches", SearchOptions{Pattern: "handler", MaxMatches: MaxMaxMatches}, MaxMaxMatches},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(total)
			for b.Loop() {
				sum, err := f.Search(b.Context(), bc.opts, func(Match) error { return nil })
				if err != nil {
					b.Fatal(err)
				}
				if sum.Matches != bc.want && !sum.Truncated {
					b.Fatalf("%d matches, want %d", sum.Matches, bc.want)
				}
			}
		})
	}
}

func BenchmarkGlob20k(b *testing.B) {
	dir, _ := searchTree(b)
	f, err := New(Options{Workspace: dir})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		res, err := f.Glob(b.Context(), GlobOptions{Pattern: "**/file1*.go", MaxResults: MaxGlobResults})
		if err != nil || len(res.Paths) != 10_000 {
			b.Fatalf("%d paths, %v", len(res.Paths), err)
		}
	}
}
