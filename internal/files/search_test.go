package files

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// search runs Search and collects its matches, with paths relative to ws.
func search(t *testing.T, f *FS, ws string, opts SearchOptions) ([]Match, Summary, error) {
	t.Helper()
	var got []Match
	sum, err := f.Search(t.Context(), opts, func(m Match) error {
		m.Path = strings.TrimPrefix(m.Path, ws+"/")
		got = append(got, m)
		return nil
	})
	return got, sum, err
}

func TestSearch(t *testing.T) {
	t.Parallel()
	f, ws := newTestFS(t)
	writeFiles(t, ws, map[string]string{
		".gitignore":           "ignored/\n*.gen.go\n",
		"main.go":              "package main\n\nfunc main() {\n\tprintln(\"hello\")\n}\n",
		"util/strings.go":      "package util\n\n// Hello says hello.\nfunc Hello() string { return \"hello\" }\n",
		"util/strings_test.go": "package util\n\nfunc TestHello(t *testing.T) {}\n",
		"util/x.gen.go":        "hello generated\n",
		"ignored/a.txt":        "hello ignored\n",
		".hidden/h.txt":        "hello hidden\n",
		".git/config":          "hello git\n",
		"bin.dat":              "hello\x00binary\n",
		"crlf.txt":             "say hello\r\nbye\r\n",
		"regex.txt":            "a.b\naxb\n(x)\n",
		"docs/readme.md":       "Hello docs\n",
	})
	type m struct {
		Path string
		Line int64
		Text string
	}
	brief := func(ms []Match) []m {
		out := []m{}
		for _, x := range ms {
			out = append(out, m{x.Path, x.Line, x.Text})
		}
		return out
	}
	tests := []struct {
		name string
		opts SearchOptions
		want []m
		sum  Summary
	}{
		{name: "default", opts: SearchOptions{Pattern: "hello"}, want: []m{
			{"crlf.txt", 1, "say hello"},
			{"main.go", 4, "\tprintln(\"hello\")"},
			{"util/strings.go", 3, "// Hello says hello."},
			{"util/strings.go", 4, "func Hello() string { return \"hello\" }"},
		}, sum: Summary{FilesScanned: 6, FilesMatched: 3, Matches: 4, FilesSkipped: 1}},
		{name: "ignore case", opts: SearchOptions{Pattern: "HELLO", IgnoreCase: true, Include: []string{"*.md", "util/*_test.go"}}, want: []m{
			{"docs/readme.md", 1, "Hello docs"},
			{"util/strings_test.go", 3, "func TestHello(t *testing.T) {}"},
		}, sum: Summary{FilesScanned: 2, FilesMatched: 2, Matches: 2}},
		{name: "regex", opts: SearchOptions{Pattern: `^func \w+\(`}, want: []m{
			{"main.go", 3, "func main() {"},
			{"util/strings.go", 4, "func Hello() string { return \"hello\" }"},
			{"util/strings_test.go", 3, "func TestHello(t *testing.T) {}"},
		}, sum: Summary{FilesScanned: 6, FilesMatched: 3, Matches: 3, FilesSkipped: 1}},
		{name: "fixed", opts: SearchOptions{Pattern: "a.b", Fixed: true}, want: []m{{"regex.txt", 1, "a.b"}},
			sum: Summary{FilesScanned: 6, FilesMatched: 1, Matches: 1, FilesSkipped: 1}},
		{name: "fixed ignore case", opts: SearchOptions{Pattern: "(X)", Fixed: true, IgnoreCase: true}, want: []m{{"regex.txt", 3, "(x)"}},
			sum: Summary{FilesScanned: 6, FilesMatched: 1, Matches: 1, FilesSkipped: 1}},
		{name: "exclude dir", opts: SearchOptions{Pattern: "hello", Exclude: []string{"util"}}, want: []m{
			{"crlf.txt", 1, "say hello"},
			{"main.go", 4, "\tprintln(\"hello\")"},
		}, sum: Summary{FilesScanned: 4, FilesMatched: 2, Matches: 2, FilesSkipped: 1}},
		{name: "negated include", opts: SearchOptions{Pattern: "hello", Include: []string{"!*.go"}}, want: []m{
			{"crlf.txt", 1, "say hello"},
		}, sum: Summary{FilesScanned: 3, FilesMatched: 1, Matches: 1, FilesSkipped: 1}},
		{name: "no ignore, hidden, binary", opts: SearchOptions{Pattern: "hello", NoIgnore: true, Hidden: true, Binary: true, Include: []string{"*.txt", "*.dat", "*.gen.go"}}, want: []m{
			{".hidden/h.txt", 1, "hello hidden"},
			{"bin.dat", 1, "hello\x00binary"},
			{"crlf.txt", 1, "say hello"},
			{"ignored/a.txt", 1, "hello ignored"},
			{"util/x.gen.go", 1, "hello generated"},
		}, sum: Summary{FilesScanned: 6, FilesMatched: 5, Matches: 5}},
		{name: "max matches", opts: SearchOptions{Pattern: "hello", MaxMatches: 2}, want: []m{
			{"crlf.txt", 1, "say hello"},
			{"main.go", 4, "\tprintln(\"hello\")"},
		}, sum: Summary{FilesScanned: 5, FilesMatched: 2, Matches: 2, Truncated: true, FilesSkipped: 1}},
		{name: "max matches exactly reached", opts: SearchOptions{Pattern: "hello", MaxMatches: 4}, want: []m{
			{"crlf.txt", 1, "say hello"},
			{"main.go", 4, "\tprintln(\"hello\")"},
			{"util/strings.go", 3, "// Hello says hello."},
			{"util/strings.go", 4, "func Hello() string { return \"hello\" }"},
		}, sum: Summary{FilesScanned: 6, FilesMatched: 3, Matches: 4, FilesSkipped: 1}},
		{name: "one file", opts: SearchOptions{Pattern: "hello", Path: "ignored/a.txt"}, want: []m{{"ignored/a.txt", 1, "hello ignored"}},
			sum: Summary{FilesScanned: 1, FilesMatched: 1, Matches: 1}},
		{name: "subdirectory", opts: SearchOptions{Pattern: "package", Path: "util"}, want: []m{
			{"util/strings.go", 1, "package util"},
			{"util/strings_test.go", 1, "package util"},
		}, sum: Summary{FilesScanned: 2, FilesMatched: 2, Matches: 2}},
		{name: "no match", opts: SearchOptions{Pattern: "zzz"}, want: []m{}, sum: Summary{FilesScanned: 6, FilesSkipped: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, sum, err := search(t, f, ws, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(brief(got), tc.want); diff != "" {
				t.Errorf("matches (-got +want):\n%s", diff)
			}
			if diff := cmp.Diff(sum, tc.sum); diff != "" {
				t.Errorf("summary (-got +want):\n%s", diff)
			}
		})
	}

	t.Run("errors", func(t *testing.T) {
		t.Parallel()
		_, _, err := search(t, f, ws, SearchOptions{Pattern: "a(b"})
		wantKind(t, err, errs.Invalid, "invalid regular expression", "missing closing )", "fixed_string")
		_, _, err = search(t, f, ws, SearchOptions{})
		wantKind(t, err, errs.Invalid, "pattern is empty")
		_, _, err = search(t, f, ws, SearchOptions{Pattern: "x", Context: -1})
		wantKind(t, err, errs.Invalid, "context_lines")
		_, _, err = search(t, f, ws, SearchOptions{Pattern: "x", MaxMatches: MaxMaxMatches + 1})
		wantKind(t, err, errs.Invalid, "max_matches")
		_, _, err = search(t, f, ws, SearchOptions{Pattern: "x", Path: "nope"})
		wantKind(t, err, errs.NotFound, "nope does not exist")
		_, _, err = search(t, f, ws, SearchOptions{Pattern: "x", Include: []string{"[unclosed"}})
		wantKind(t, err, errs.Invalid, "include glob")
		_, _, err = search(t, f, ws, SearchOptions{Pattern: "a\nb", Fixed: true})
		wantKind(t, err, errs.Invalid, "newline")
	})
}

func TestSearchContext(t *testing.T) {
	t.Parallel()
	f, ws := newTestFS(t)
	var lines []string
	for i := 1; i <= 20; i++ {
		lines = append(lines, fmt.Sprintf("line %d", i))
	}
	lines[4] = "match 5"
	lines[6] = "match 7"
	lines[14] = "match 15"
	lines[19] = "match 20"
	writeFiles(t, ws, map[string]string{"f.txt": strings.Join(lines, "\n") + "\n"})

	want := []Match{
		{Path: "f.txt", Line: 5, Text: "match 5", Before: []string{"line 3", "line 4"}, After: []string{"line 6"}},
		{Path: "f.txt", Line: 7, Text: "match 7", After: []string{"line 8", "line 9"}},
		{Path: "f.txt", Line: 15, Text: "match 15", Before: []string{"line 13", "line 14"}, After: []string{"line 16", "line 17"}},
		{Path: "f.txt", Line: 20, Text: "match 20", Before: []string{"line 18", "line 19"}},
	}
	for _, mode := range []string{"buffer", "lines"} {
		fs := *f
		if mode == "lines" {
			fs.searchWholeFile = 0
		}
		got, _, err := search(t, &fs, ws, SearchOptions{Pattern: "^match", Context: 2})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(got, want); diff != "" {
			t.Errorf("%s mode (-got +want):\n%s", mode, diff)
		}
	}
}

func TestSearchLongLine(t *testing.T) {
	t.Parallel()
	f, ws := newTestFS(t)
	long := strings.Repeat("a", 5000) + "NEEDLE" + strings.Repeat("b", 5000)
	writeFiles(t, ws, map[string]string{"min.js": long + "\n"})
	got, _, err := search(t, f, ws, SearchOptions{Pattern: "NEEDLE"})
	if err != nil || len(got) != 1 {
		t.Fatalf("got %v, %v", got, err)
	}
	text := got[0].Text
	// The match is at byte 5000: the shown window starts 125 bytes before it.
	if !strings.Contains(text, "NEEDLE") || !strings.HasPrefix(text, "[… 4875 bytes] ") ||
		!strings.HasSuffix(text, "… [line truncated, 4631 more bytes]") {
		t.Errorf("cut line = %q", shorten(text, 80))
	}
}

func TestSearchStops(t *testing.T) {
	t.Parallel()
	f, ws := newTestFS(t)
	files := map[string]string{}
	for i := range 200 {
		files[fmt.Sprintf("d%d/f%03d.txt", i%7, i)] = "x\nneedle\n"
	}
	writeFiles(t, ws, files)

	stop := errors.New("stop")
	n := 0
	_, err := f.Search(t.Context(), SearchOptions{Pattern: "needle"}, func(Match) error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	})
	if err != stop || n != 3 {
		t.Errorf("Search = %v after %d matches, want the emit error after 3", err, n)
	}

	ctx, cancel := context.WithCancel(t.Context())
	_, err = f.Search(ctx, SearchOptions{Pattern: "needle"}, func(Match) error { cancel(); return nil })
	wantKind(t, err, errs.Canceled)
}

// TestSearchModesAgree runs random patterns over random files with the
// whole-buffer scan and the line-by-line scan and wants the same matches.
func TestSearchModesAgree(t *testing.T) {
	t.Parallel()
	f, ws := newTestFS(t)
	rng := rand.New(rand.NewPCG(7, 8))
	words := []string{"foo", "bar", "baz", "Foo", "x", " ", "\t", "\n", "\n", "\r\n", "é", "foo bar", ""}
	files := map[string]string{}
	for i := range 40 {
		var sb strings.Builder
		for range rng.IntN(60) {
			sb.WriteString(words[rng.IntN(len(words))])
		}
		files[fmt.Sprintf("f%02d.txt", i)] = sb.String()
	}
	writeFiles(t, ws, files)
	lineMode := *f
	lineMode.searchWholeFile = 0
	patterns := []string{"foo", "^foo", "bar$", `foo\s+bar`, `o\nb`, "^$", "x*", `\bbaz\b`, "é", `(?i)FOO`, `foo|baz`, `\Afoo`, `bar\z`, `[^o]+`, `.`}
	for _, p := range patterns {
		for _, c := range []int{0, 1, 3} {
			opts := SearchOptions{Pattern: p, Context: c, MaxMatches: 500}
			a, sa, err := search(t, f, ws, opts)
			if err != nil {
				t.Fatal(err)
			}
			b, sb, err := search(t, &lineMode, ws, opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(a, b); diff != "" {
				t.Fatalf("pattern %q context %d: buffer vs line mode (-buffer +lines):\n%s", p, c, diff)
			}
			if diff := cmp.Diff(sa, sb); diff != "" {
				t.Fatalf("pattern %q: summaries differ (-buffer +lines):\n%s", p, diff)
			}
		}
	}
}

// TestSearchMatchesGrep compares matches with grep -rn on a tree without
// ignore files, hidden or binary files.
func TestSearchMatchesGrep(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("grep"); err != nil {
		t.Skip("grep not installed")
	}
	f, ws := newTestFS(t)
	rng := rand.New(rand.NewPCG(3, 4))
	files := map[string]string{}
	for i := range 300 {
		var sb strings.Builder
		for l := range rng.IntN(50) {
			fmt.Fprintf(&sb, "line %d value %d %s\n", l, rng.IntN(1000), [...]string{"foo", "fooo", "bar", "fobar", "foobaz"}[rng.IntN(5)])
		}
		files[fmt.Sprintf("dir%d/sub%d/file%d.txt", i%5, i%3, i)] = sb.String()
	}
	writeFiles(t, ws, files)
	for _, p := range []string{"fo+ba[rz]", "value 9[0-9]+ ", "^line 1 "} {
		got, _, err := search(t, f, ws, SearchOptions{Pattern: p, MaxMatches: MaxMaxMatches})
		if err != nil {
			t.Fatal(err)
		}
		var gotLines []string
		for _, m := range got {
			gotLines = append(gotLines, fmt.Sprintf("%s:%d:%s", m.Path, m.Line, m.Text))
		}
		cmd := exec.Command("grep", "-rnE", p, ".")
		cmd.Dir = ws
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("grep: %v", err)
		}
		var want []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			want = append(want, strings.TrimPrefix(l, "./"))
		}
		sort.Strings(want)
		sort.Strings(gotLines)
		if diff := cmp.Diff(gotLines, want); diff != "" {
			t.Errorf("pattern %q vs grep (-got +want):\n%s", p, diff)
		}
	}
}

func TestSearchOrderIsDeterministic(t *testing.T) {
	t.Parallel()
	f, ws := newTestFS(t)
	files := map[string]string{}
	for i := range 500 {
		files[fmt.Sprintf("%c/%d.txt", 'a'+i%26, i)] = strings.Repeat("hit\n", i%4+1)
	}
	writeFiles(t, ws, files)
	first, _, err := search(t, f, ws, SearchOptions{Pattern: "hit", MaxMatches: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		again, _, err := search(t, f, ws, SearchOptions{Pattern: "hit", MaxMatches: 10_000})
		if err != nil {
			t.Fatal(err)
		}
		if !cmp.Equal(again, first) {
			t.Fatal("two searches of the same tree gave different orders")
		}
	}
}

// TestSearchIgnoreCaseUnicode checks that the ASCII prefilter of
// case-insensitive searches does not hide Unicode case matches.
func TestSearchIgnoreCaseUnicode(t *testing.T) {
	t.Parallel()
	f, ws := newTestFS(t)
	writeFiles(t, ws, map[string]string{
		"kelvin.txt": "\u212Aelvin degrees\n", // KELVIN SIGN folds to k
		"longs.txt":  "Stra\u017F\u017Fe\n",   // LATIN SMALL LONG S folds to s
		"acute.txt":  "CAFÉ AU LAIT\n",
		"plain.txt":  "nothing here\n",
	})
	for _, tc := range []struct {
		pattern string
		want    string
	}{
		{"kelvin degrees", "kelvin.txt"},
		{"strasse", "longs.txt"},
		{"café au lait", "acute.txt"},
	} {
		got, _, err := search(t, f, ws, SearchOptions{Pattern: tc.pattern, IgnoreCase: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Path != tc.want {
			t.Errorf("(?i)%s: got %+v, want a match in %s", tc.pattern, got, tc.want)
		}
	}
}
