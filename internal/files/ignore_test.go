package files

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMatchSegment(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pat, name string
		want      bool
	}{
		{"*.go", "main.go", true},
		{"*.go", "main.go.bak", false},
		{"*", "", true},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "aXbY", false},
		{"?.txt", "é.txt", true},
		{"?.txt", "ab.txt", false},
		{"[abc].x", "b.x", true},
		{"[!abc].x", "b.x", false},
		{"[^abc].x", "d.x", true},
		{"[a-c]", "c", true},
		{"[a-c]", "d", false},
		{"[]]", "]", true},
		{"[[:digit:]]x", "7x", true},
		{"[[:upper:]]", "a", false},
		{"\\*", "*", true},
		{"\\*", "a", false},
		{"[unclosed", "[unclosed", true},
		{"**", "anything", true},
		{"foo", "foo", true},
		{"foo", "foobar", false},
	}
	for _, tc := range tests {
		if got := matchSegment(tc.pat, tc.name); got != tc.want {
			t.Errorf("matchSegment(%q, %q) = %v, want %v", tc.pat, tc.name, got, tc.want)
		}
	}
}

func TestIgnoreRules(t *testing.T) {
	t.Parallel()
	gitignore := `
# comment
*.log
!keep.log
build/
/root-only
doc/*.txt
**/deep
a/**/z
out/**
\#hash
trailing   
escaped\ 
`
	rules := ignoreRules(parseIgnore([]byte(gitignore), "/r"))
	tests := []struct {
		path  string
		isDir bool
		want  bool
	}{
		{"/r/x.log", false, true},
		{"/r/sub/x.log", false, true},
		{"/r/keep.log", false, false},
		{"/r/build", true, true},
		{"/r/build", false, false}, // a file named build: dir-only pattern
		{"/r/sub/build", true, true},
		{"/r/root-only", false, true},
		{"/r/sub/root-only", false, false},
		{"/r/doc/a.txt", false, true},
		{"/r/doc/sub/a.txt", false, false},
		{"/r/x/y/deep", false, true},
		{"/r/deep", true, true},
		{"/r/a/z", false, true},
		{"/r/a/b/c/z", false, true},
		{"/r/out", true, false},
		{"/r/out/x", false, true},
		{"/r/#hash", false, true},
		{"/r/trailing", false, true},
		{"/r/escaped ", false, true},
		{"/r/comment", false, false},
		{"/elsewhere/x.log", false, false},
	}
	for _, tc := range tests {
		if got := rules.ignored(tc.path, tc.isDir); got != tc.want {
			t.Errorf("ignored(%q, dir=%v) = %v, want %v", tc.path, tc.isDir, got, tc.want)
		}
	}
}

// TestIgnoreMatchesGit builds a repository with nested .gitignore files and
// compares what walkTree visits with what git itself lists.
func TestIgnoreMatchesGit(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		".gitignore":                "*.o\n/tmp/\nlogs/\n!important.o\nnode_modules\n**/gen/*.go\n*.bak\n!/keep.bak\nsecret*\n[Dd]ebug/\nfoo/**/bar\n",
		"a.go":                      "x",
		"a.o":                       "x",
		"important.o":               "x",
		"keep.bak":                  "x",
		"sub/keep.bak":              "x",
		"tmp/x":                     "x",
		"sub/tmp/x":                 "x",
		"logs/today":                "x",
		"sub/logs/today":            "x",
		"node_modules/pkg/index.js": "x",
		"sub/node_modules":          "file, not dir",
		"src/gen/a.go":              "x",
		"src/gen/a.txt":             "x",
		"src/x/gen/b.go":            "x",
		"secret.txt":                "x",
		"src/secrets/y":             "x",
		"Debug/out":                 "x",
		"src/debug/out":             "x",
		"foo/bar":                   "x",
		"foo/a/b/bar":               "x",
		"foo/a/barn":                "x",
		"nested/.gitignore":         "*.txt\n!special.txt\n/local\n",
		"nested/a.txt":              "x",
		"nested/special.txt":        "x",
		"nested/local":              "x",
		"nested/deeper/local":       "x",
		"nested/deeper/b.txt":       "x",
		"nested/deeper/.gitignore":  "!b.txt\n",
		"nested/deeper/c.o":         "x",
		"excluded-by-info":          "x",
		"weird name [1].txt":        "x",
		"sp ace/f":                  "x",
	})
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return string(out)
	}
	git("init", "-q")
	if err := os.WriteFile(filepath.Join(dir, ".git/info/exclude"), []byte("excluded-by-info\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Files git would add: tracked-to-be, not ignored.
	want := strings.Split(strings.TrimRight(git("ls-files", "--others", "--exclude-standard", "-z"), "\x00"), "\x00")
	sort.Strings(want)

	for _, root := range []string{dir, filepath.Join(dir, "nested")} {
		var got []string
		err := walkTree(t.Context(), root, walkOptions{hidden: true}, func(p, rel string, typ os.FileMode) error {
			if !typ.IsDir() {
				r, _ := filepath.Rel(dir, p)
				got = append(got, r)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		sort.Strings(got)
		var wantHere []string
		for _, w := range want {
			if root == dir || strings.HasPrefix(w, "nested/") {
				wantHere = append(wantHere, w)
			}
		}
		if diff := cmp.Diff(got, wantHere); diff != "" {
			t.Errorf("walk from %s vs git ls-files (-got +want):\n%s", root, diff)
		}
	}
}
