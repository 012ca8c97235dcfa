//go:build unix

package runner

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestLookCache checks what a lookCache remembers: the answers its probe
// calls permanent, found and not found alike, and of the other paths only
// that they are not.
func TestLookCache(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		permanent bool
		// want: found before, after the program is removed, after it is
		// put back in another PATH directory that comes first.
		want []string
	}{
		{"permanent", true, []string{"a", "a", "a"}},
		{"not proven", false, []string{"a", "", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, b := t.TempDir(), t.TempDir()
			env := []string{"PATH=" + b + ":" + a}
			probed := map[string]int{}
			c := &lookCache{probe: func(p string) bool { probed[p]++; return tc.permanent }, m: map[string]lookResult{}}
			prog := filepath.Join(a, "prog")
			writeExecutable(t, prog)
			find := func() string {
				p, err := lookPath("prog", "/", env, c)
				switch {
				case err != nil:
					return ""
				case p == prog:
					return "a"
				case p == filepath.Join(b, "prog"):
					return "b"
				}
				return p
			}
			var got []string
			got = append(got, find())
			if err := os.Remove(prog); err != nil {
				t.Fatal(err)
			}
			got = append(got, find())
			writeExecutable(t, filepath.Join(b, "prog"))
			got = append(got, find())
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("lookups (-got +want):\n%s", diff)
			}
			// The verdict is remembered either way: one probe per path.
			wantProbed := map[string]int{prog: 1, filepath.Join(b, "prog"): 1}
			if diff := cmp.Diff(probed, wantProbed); diff != "" {
				t.Errorf("probes (-got +want):\n%s", diff)
			}
		})
	}
}

// TestLookCacheBounded checks that names that do not exist cannot grow the
// cache without bound.
func TestLookCacheBounded(t *testing.T) {
	t.Parallel()
	c := &lookCache{probe: func(string) bool { return true }, m: map[string]lookResult{}}
	env := []string{"PATH=" + t.TempDir()}
	for i := range maxLookCache + 10 {
		if _, err := lookPath("missing-"+strconv.Itoa(i), "/", env, c); err == nil {
			t.Fatalf("missing-%d found", i)
		}
	}
	if n := len(c.m); n > maxLookCache {
		t.Errorf("%d entries cached, want at most %d", n, maxLookCache)
	}
}

// TestLookCacheNil checks that a nil cache (the default) looks every
// program up.
func TestLookCacheNil(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{"PATH=" + dir}
	var c *lookCache
	if _, err := lookPath("prog", "/", env, c); err == nil {
		t.Fatal("prog found before it exists")
	}
	writeExecutable(t, filepath.Join(dir, "prog"))
	if _, err := lookPath("prog", "/", env, c); err != nil {
		t.Fatalf("prog not found once it exists: %v", err)
	}
}

func writeExecutable(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}
