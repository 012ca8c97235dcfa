package files

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/devdepot-ai/agentd/internal/errs"
)

func TestNew(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	writeFiles(t, dir, map[string]string{"f": "x"})

	if _, err := New(Options{Workspace: file}); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("New(workspace = a file) = %v, want a 'not a directory' error", err)
	}
	if _, err := New(Options{Workspace: filepath.Join(dir, "missing")}); err == nil {
		t.Error("New(missing workspace) succeeded")
	}
	f, err := New(Options{Workspace: dir})
	if err != nil {
		t.Fatal(err)
	}
	if f.Workspace() != dir {
		t.Errorf("Workspace() = %q, want %q", f.Workspace(), dir)
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	f, err := New(Options{Workspace: ws, Home: "/home/u"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		in   string
		want string
		kind errs.Kind // 0: no error
		msg  string
	}{
		{in: "a/b.txt", want: ws + "/a/b.txt"},
		{in: "./a/../b", want: ws + "/b"},
		{in: ".", want: ws},
		{in: "/etc//passwd", want: "/etc/passwd"},
		{in: "/", want: "/"},
		{in: "/../..", want: "/"},
		{in: "~", want: "/home/u"},
		{in: "~/x/y", want: "/home/u/x/y"},
		{in: "~user/x", want: ws + "/~user/x"},
		{in: "../outside", want: filepath.Dir(ws) + "/outside"},
		{in: "", kind: errs.Invalid, msg: "path is empty"},
		{in: "a\x00b", kind: errs.Invalid, msg: "NUL byte at offset 1"},
		{in: "bad\xffutf8", kind: errs.Invalid, msg: "not valid UTF-8"},
		{in: "/" + strings.Repeat("a/", MaxPathLen), kind: errs.Invalid, msg: "the limit is 4096"},
		{in: "/tmp/" + strings.Repeat("n", 256), kind: errs.Invalid, msg: "256 bytes long; the limit is 255"},
	}
	for _, tc := range tests {
		got, err := f.Resolve(tc.in)
		if tc.kind != 0 {
			wantKind(t, err, tc.kind, tc.msg)
			continue
		}
		if err != nil {
			t.Errorf("Resolve(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("Resolve(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzResolvePath checks that path handling never panics and that what it
// returns is what callers rely on: an absolute, clean path without NUL
// bytes, inside the workspace when the input is relative and has no "..".
func FuzzResolvePath(f *testing.F) {
	for _, s := range []string{"", ".", "..", "a/b", "/abs/x", "~", "~/x", "~x", "a\x00b", "\xff", "a//b/../c",
		"../../../../etc/passwd", strings.Repeat("x/", 3000), "/" + strings.Repeat("y", 300)} {
		f.Add(s)
	}
	ws := f.TempDir()
	fsys, err := New(Options{Workspace: ws, Home: "/home/u"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := fsys.Resolve(in)
		if err != nil {
			if errs.KindOf(err) != errs.Invalid {
				t.Fatalf("Resolve(%q): error of kind %v, want Invalid: %v", in, kindName(errs.KindOf(err)), err)
			}
			return
		}
		switch {
		case in == "" || strings.IndexByte(in, 0) >= 0 || !utf8.ValidString(in):
			t.Fatalf("Resolve(%q) = %q, want an error", in, got)
		case !filepath.IsAbs(got):
			t.Fatalf("Resolve(%q) = %q: not absolute", in, got)
		case filepath.Clean(got) != got:
			t.Fatalf("Resolve(%q) = %q: not clean", in, got)
		case len(got) > MaxPathLen:
			t.Fatalf("Resolve(%q) = %q: longer than MaxPathLen", in, got)
		}
		if filepath.IsAbs(in) && got != filepath.Clean(in) {
			t.Fatalf("Resolve(%q) = %q, want %q", in, got, filepath.Clean(in))
		}
		escapes := strings.HasPrefix(in, "~") || filepath.IsAbs(in)
		for _, c := range strings.Split(in, "/") {
			if c == ".." {
				escapes = true
			}
		}
		if !escapes && got != ws && !strings.HasPrefix(got, ws+string(os.PathSeparator)) {
			t.Fatalf("Resolve(%q) = %q: a relative path without .. left the workspace %s", in, got, ws)
		}
	})
}
