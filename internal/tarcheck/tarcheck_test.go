package tarcheck

import (
	"archive/tar"
	"bytes"
	"io"
	"testing"

	"github.com/devdepot-ai/agentd/internal/errs"
)

func TestRelPath(t *testing.T) {
	for name, want := range map[string]string{"a/b": "a/b", "./a//b/": "a/b", ".": "", "": ""} {
		if got, err := RelPath(name); err != nil || got != want {
			t.Errorf("RelPath(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
	for _, name := range []string{"/etc/passwd", "a/../../b", "..", "a\x00b"} {
		if _, err := RelPath(name); errs.KindOf(err) != errs.Invalid {
			t.Errorf("RelPath(%q) = %v, want Invalid", name, err)
		}
	}
}

// TestComplete: a whole archive ends complete; the same cut between its
// entries does not, though archive/tar reads both to io.EOF.
func TestComplete(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range []string{"a", "b"} {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: 1, Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	whole := buf.Bytes()
	for _, tc := range []struct {
		name string
		data []byte
		want bool
	}{{"whole", whole, true}, {"cut after the first entry", whole[:1024], false}, {"empty", nil, false}} {
		r := NewReader(bytes.NewReader(tc.data))
		tr := tar.NewReader(r)
		for {
			if _, err := tr.Next(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		if got := r.Complete(); got != tc.want {
			t.Errorf("%s: Complete = %v, want %v", tc.name, got, tc.want)
		}
	}
}
