package archive

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashEnv) != "" {
		crashChild() // the kill -9 test's child: never returns
	}
	goleak.VerifyTestMain(m,
		// The AWS SDK's HTTP client keeps idle connections to the loopback
		// S3 server; they end with the server.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}

// tentry is a tar entry as tests write and compare them.
type tentry struct {
	Name  string
	Type  byte
	Mode  int64
	Data  string
	Link  string
	MTime time.Time
}

var t0 = time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)

// makeTar writes entries as a tar stream.
func makeTar(t testing.TB, entries []tentry) []byte {
	t.Helper()
	b, err := tarBytes(entries)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func tarBytes(entries []tentry) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.Name, Typeflag: e.Type, Mode: e.Mode, ModTime: e.MTime, Linkname: e.Link}
		if e.MTime.IsZero() {
			hdr.ModTime = t0
		}
		if e.MTime.Nanosecond() != 0 {
			hdr.Format = tar.FormatPAX
		}
		if e.Type == tar.TypeReg {
			hdr.Size = int64(len(e.Data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := io.WriteString(tw, e.Data); err != nil {
			return nil, err
		}
	}
	err := tw.Close()
	return buf.Bytes(), err
}

// readTar reads a tar stream back into entries (hard links resolved to
// their content, as an archive keeps them).
func readTar(t testing.TB, data []byte) []tentry {
	t.Helper()
	var out []tentry
	byName := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		e := tentry{Name: hdr.Name, Type: hdr.Typeflag, Mode: hdr.Mode, Data: string(b), Link: hdr.Linkname, MTime: hdr.ModTime.UTC()}
		if e.Type == tar.TypeLink {
			e.Type, e.Data, e.Link = tar.TypeReg, byName[hdr.Linkname], ""
		}
		byName[e.Name] = e.Data
		out = append(out, e)
	}
}

// workspace returns a deterministic tree of n files of assorted sizes
// (some above the in-memory limit of testOptions), with directories and
// a symlink, as tar entries.
func workspace(seed uint64, n int) []tentry {
	r := rand.New(rand.NewPCG(seed, seed))
	es := []tentry{{Name: "src/", Type: tar.TypeDir, Mode: 0o755}, {Name: "data/", Type: tar.TypeDir, Mode: 0o700}}
	for i := range n {
		size := r.IntN(8 << 10)
		if i%7 == 3 {
			size = 300<<10 + r.IntN(100<<10) // through a temporary file
		}
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		dir := "src"
		if i%2 == 1 {
			dir = "data"
		}
		es = append(es, tentry{Name: fmt.Sprintf("%s/f%03d.bin", dir, i), Type: tar.TypeReg, Mode: 0o644, Data: string(b)})
	}
	es = append(es, tentry{Name: "latest", Type: tar.TypeSymlink, Mode: 0o777, Link: "src/f000.bin"})
	return es
}

// testOptions are small enough that tests go through every path.
func testOptions(t testing.TB) Options {
	return Options{Logger: zaptest.NewLogger(t), MemoryBytes: 1 << 20, Uploads: 4, Grace: -1, PendingTimeout: time.Hour, TempDir: t.TempDir()}
}

func isCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }
