package files

import (
	"bytes"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/devdepot-ai/agentd/internal/errs"
)

const goSource = `package main

import "fmt"

func main() {
	fmt.Println("hello")
	for i := 0; i < 3; i++ {
		fmt.Println(i)
	}
}

func helper(x int) int {
	return x * 2
}
`

func TestEdit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		content string
		edits   []Replacement
		opts    EditOptions
		kind    errs.Kind // 0: success
		msgs    []string
		want    string // content afterwards, on success
		count   int
		diff    string // expected diff, with PATH for the path; "" to skip
	}{
		{
			name:    "unique",
			content: goSource,
			edits:   []Replacement{{Old: `fmt.Println("hello")`, New: `fmt.Println("hello, world")`}},
			want:    strings.Replace(goSource, `"hello"`, `"hello, world"`, 1),
			count:   1,
			diff: `--- PATH
+++ PATH
@@ -3,7 +3,7 @@
 import "fmt"
 
 func main() {
-	fmt.Println("hello")
+	fmt.Println("hello, world")
 	for i := 0; i < 3; i++ {
 		fmt.Println(i)
 	}
`,
		},
		{
			name:    "replace all",
			content: goSource,
			edits:   []Replacement{{Old: "fmt.Println", New: "log.Print", ReplaceAll: true}},
			want:    strings.ReplaceAll(goSource, "fmt.Println", "log.Print"),
			count:   2,
		},
		{
			name:    "in order",
			content: "a b c\n",
			edits:   []Replacement{{Old: "a", New: "x"}, {Old: "x b", New: "y"}},
			want:    "y c\n",
			count:   2,
			diff:    "--- PATH\n+++ PATH\n@@ -1 +1 @@\n-a b c\n+y c\n",
		},
		{
			name:    "delete lines",
			content: "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n",
			edits:   []Replacement{{Old: "1\n2\n3", New: "1\n3"}, {Old: "14\n", New: "14\n14b\n"}},
			want:    "1\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n14b\n15\n",
			count:   2,
			diff:    "--- PATH\n+++ PATH\n@@ -1,5 +1,4 @@\n 1\n-2\n 3\n 4\n 5\n@@ -12,4 +11,5 @@\n 12\n 13\n 14\n+14b\n 15\n",
		},
		{
			name:    "no newline at end",
			content: "a\nb",
			edits:   []Replacement{{Old: "b", New: "c"}},
			want:    "a\nc",
			count:   1,
			diff:    "--- PATH\n+++ PATH\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n",
		},
		{
			name:    "dry run",
			content: "keep\n",
			edits:   []Replacement{{Old: "keep", New: "changed"}},
			opts:    EditOptions{DryRun: true},
			want:    "keep\n",
			count:   1,
			diff:    "--- PATH\n+++ PATH\n@@ -1 +1 @@\n-keep\n+changed\n",
		},
		{
			name:    "expected sha matches",
			content: "x\n",
			edits:   []Replacement{{Old: "x", New: "y"}},
			opts:    EditOptions{ExpectedSHA256: sha("x\n")},
			want:    "y\n",
			count:   1,
		},

		{name: "not found: closest line", content: goSource,
			edits: []Replacement{{Old: "return x * 3", New: "return x"}},
			kind:  errs.NotFound, msgs: []string{"old_string not found in ", "closest match at line 13", "return x * 2"}},
		{name: "not found: indentation", content: goSource,
			edits: []Replacement{{Old: "for i := 0; i < 3; i++ {\n    fmt.Println(i)\n}", New: "x"}},
			kind:  errs.NotFound, msgs: []string{"matches lines 7-9 if whitespace is ignored", "indentation"}},
		{name: "not found: crlf", content: "one\r\ntwo\r\n",
			edits: []Replacement{{Old: "one\ntwo", New: "x"}},
			kind:  errs.NotFound, msgs: []string{`Windows line endings (\r\n)`}},
		{name: "not found: nothing alike", content: goSource,
			edits: []Replacement{{Old: "QQQQQQQQQQQQQQQQQQQQQ", New: "x"}},
			kind:  errs.NotFound, msgs: []string{"no line resembles it"}},
		{name: "not found after earlier edit", content: "alpha\nbeta\n",
			edits: []Replacement{{Old: "alpha", New: "gamma"}, {Old: "alpha", New: "delta"}},
			kind:  errs.NotFound, msgs: []string{"edit 2 of 2: old_string not found", "after the earlier edits"}},
		{name: "ambiguous", content: goSource,
			edits: []Replacement{{Old: "fmt.Println", New: "log.Print"}},
			kind:  errs.Precondition, msgs: []string{"old_string occurs 2 times", "(lines 6, 8)", "set replace_all"}},
		{name: "ambiguous on one line", content: "a a a\n",
			edits: []Replacement{{Old: "a", New: "b"}},
			kind:  errs.Precondition, msgs: []string{"occurs 3 times", "all on line 1"}},
		{name: "empty old", content: "x", edits: []Replacement{{Old: "", New: "y"}}, kind: errs.Invalid, msgs: []string{"old_string is empty"}},
		{name: "old equals new", content: "x", edits: []Replacement{{Old: "x", New: "x"}}, kind: errs.Invalid, msgs: []string{"the same"}},
		{name: "no edits", content: "x", kind: errs.Invalid, msgs: []string{"no edits"}},
		{name: "binary", content: "a\x00b", edits: []Replacement{{Old: "a", New: "c"}}, kind: errs.Precondition, msgs: []string{"binary", "use Write"}},
		{name: "expected mismatch", content: "x\n", edits: []Replacement{{Old: "x", New: "y"}},
			opts: EditOptions{ExpectedSHA256: sha("other")}, kind: errs.Precondition, msgs: []string{"has changed"}},
		{name: "all or nothing", content: "one\ntwo\n",
			edits: []Replacement{{Old: "one", New: "1"}, {Old: "three", New: "3"}},
			kind:  errs.NotFound, msgs: []string{"edit 2 of 2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, ws := newTestFS(t)
			p := filepath.Join(ws, "file.go")
			if err := os.WriteFile(p, []byte(tc.content), 0o640); err != nil {
				t.Fatal(err)
			}
			res, err := f.Edit(t.Context(), "file.go", tc.edits, tc.opts)
			if tc.kind != 0 {
				wantKind(t, err, tc.kind, tc.msgs...)
				if got := readFile(t, p); got != tc.content {
					t.Errorf("a failed edit changed the file to %q", got)
				}
				assertNoTemp(t, ws)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := readFile(t, p); got != tc.want {
				t.Errorf("content (-got +want):\n%s", cmp.Diff(got, tc.want))
			}
			newContent := tc.want
			if tc.opts.DryRun {
				newContent = strings.ReplaceAll(tc.content, tc.edits[0].Old, tc.edits[0].New)
			}
			if res.Replacements != tc.count || res.SHA256 != sha(newContent) || res.Path != p {
				t.Errorf("result %+v; want %d replacements, sha256 %s", res, tc.count, sha(newContent))
			}
			if tc.diff != "" {
				if diff := cmp.Diff(res.Diff, strings.ReplaceAll(tc.diff, "PATH", p)); diff != "" {
					t.Errorf("unified diff (-got +want):\n%s", diff)
				}
			}
			if got := fileMode(t, p).Perm(); got != 0o640 {
				t.Errorf("mode %v after edit, want 0640", got)
			}
			assertNoTemp(t, ws)
		})
	}
}

func TestEditFileErrors(t *testing.T) {
	t.Parallel()
	f, ws := newTestFS(t)
	writeFiles(t, ws, map[string]string{"d/": "", "t.txt": "text", "link": "->t.txt"})
	e := []Replacement{{Old: "a", New: "b"}}
	_, err := f.Edit(t.Context(), "missing", e, EditOptions{})
	wantKind(t, err, errs.NotFound, "does not exist; use Write")
	_, err = f.Edit(t.Context(), "d", e, EditOptions{})
	wantKind(t, err, errs.Precondition, "is a directory")
	_, err = f.Edit(t.Context(), "t.txt", make([]Replacement, MaxEdits+1), EditOptions{})
	wantKind(t, err, errs.Invalid, "the limit is")
	// Through a symlink: the target changes, the link stays.
	if _, err := f.Edit(t.Context(), "link", []Replacement{{Old: "text", New: "TEXT"}}, EditOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(ws, "t.txt")); got != "TEXT" {
		t.Errorf("target = %q", got)
	}
	if fileMode(t, filepath.Join(ws, "link"))&fs.ModeSymlink == 0 {
		t.Error("the link was replaced by a file")
	}
}

// applyUnified applies a unified diff produced by unifiedDiff to old, as
// patch(1) would, failing on any mismatch.
func applyUnified(t testing.TB, old, diff string) string {
	t.Helper()
	if diff == "" {
		return old
	}
	a := splitLines(old)
	dl := strings.SplitAfter(diff, "\n")
	if len(dl) < 2 || !strings.HasPrefix(dl[0], "--- ") || !strings.HasPrefix(dl[1], "+++ ") {
		t.Fatalf("no diff header:\n%s", diff)
	}
	var out []string
	ai := 0
	for i := 2; i < len(dl) && dl[i] != ""; {
		h := dl[i]
		var as, ac, bs, bc int
		if _, err := fmt.Sscanf(normalizeHunk(h), "@@ -%d,%d +%d,%d @@", &as, &ac, &bs, &bc); err != nil {
			t.Fatalf("bad hunk header %q: %v\n%s", h, err, diff)
		}
		start := as - 1
		if ac == 0 {
			start = as
		}
		if start < ai {
			t.Fatalf("hunk %q overlaps the previous one", h)
		}
		out = append(out, a[ai:start]...)
		ai = start
		i++
		gotA, gotB := 0, 0
		for i < len(dl) && dl[i] != "" && !strings.HasPrefix(dl[i], "@@") {
			l := dl[i]
			text := l[1:]
			if i+1 < len(dl) && strings.HasPrefix(dl[i+1], "\\ No newline") {
				text = strings.TrimSuffix(text, "\n")
				i++
			}
			switch l[0] {
			case ' ', '-':
				if ai >= len(a) || a[ai] != text {
					t.Fatalf("context/deleted line %q does not match old line %d %q\n%s", text, ai+1, safeIndex(a, ai), diff)
				}
				if l[0] == ' ' {
					out = append(out, text)
					gotB++
				}
				ai++
				gotA++
			case '+':
				out = append(out, text)
				gotB++
			default:
				t.Fatalf("bad diff line %q", l)
			}
			i++
		}
		if gotA != ac || gotB != bc {
			t.Fatalf("hunk %q: has %d old and %d new lines", h, gotA, gotB)
		}
		_ = bs
	}
	out = append(out, a[ai:]...)
	return strings.Join(out, "")
}

func safeIndex(a []string, i int) string {
	if i < len(a) {
		return a[i]
	}
	return "<EOF>"
}

// normalizeHunk writes the counts diff -u leaves out (",1").
func normalizeHunk(h string) string {
	f := strings.Fields(h)
	if len(f) < 4 {
		return h
	}
	for i := 1; i <= 2; i++ {
		if !strings.Contains(f[i], ",") {
			f[i] += ",1"
		}
	}
	return strings.Join(f[:4], " ")
}

func TestUnifiedDiffApplies(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"a\n", "b\n", "c\n", "d\n", "e\n", "same\n", "x"}
	gen := func(n int) string {
		var sb strings.Builder
		for range n {
			sb.WriteString(words[rng.IntN(len(words))])
		}
		return sb.String()
	}
	for i := range 2000 {
		a, b := gen(rng.IntN(40)), gen(rng.IntN(40))
		if i%3 == 0 { // mostly similar texts
			b = a[:len(a)/2] + gen(3) + a[len(a)/2:]
		}
		if got := applyUnified(t, a, unifiedDiff("p", a, b)); got != b {
			t.Fatalf("applying the diff of\n%q\nto\n%q\ngave\n%q", a, b, got)
		}
		// The capped search falls back to replacing the middle whole.
		as, bs := splitLines(a), splitLines(b)
		if got := applyUnified(t, a, formatDiff("p", as, bs, lineDiffMax(as, bs, 1))); got != b {
			t.Fatalf("fallback diff does not apply: %q -> %q gave %q", a, b, got)
		}
	}
}

// TestUnifiedDiffPatch checks the diff against patch(1), when installed.
func TestUnifiedDiffPatch(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("patch"); err != nil {
		t.Skip("patch(1) not installed")
	}
	dir := t.TempDir()
	a := strings.Repeat("line\n", 10) + "old\n" + strings.Repeat("tail\n", 10) + "end"
	b := strings.Repeat("line\n", 10) + "new\nextra\n" + strings.Repeat("tail\n", 10) + "end\n"
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte(a), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("patch", "-s", p)
	cmd.Stdin = strings.NewReader(unifiedDiff(p, a, b))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("patch: %v\n%s", err, out)
	}
	if got := readFile(t, p); got != b {
		t.Errorf("patched file (-got +want):\n%s", cmp.Diff(got, b))
	}
}

func TestUnifiedDiffCut(t *testing.T) {
	t.Parallel()
	var a, b strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&a, "line %d of the old file, padded to be long enough\n", i)
		fmt.Fprintf(&b, "LINE %d of the new file, padded to be long enough\n", i)
	}
	d := unifiedDiff("p", a.String(), b.String())
	if len(d) > MaxDiffBytes+200 || !strings.Contains(d, "diff cut at 256 KiB") {
		t.Errorf("diff of %d bytes, ends %q", len(d), d[max(0, len(d)-100):])
	}
}

// FuzzEdit checks Edit against strings.Replace: either the edit fails with
// the error the rules call for and the file is unchanged, or the file holds
// exactly what sequential strings.Replace calls give, and the diff turns
// the old content into the new.
func FuzzEdit(f *testing.F) {
	f.Add("hello world\n", "world", "there", false, "", "", false)
	f.Add("a a a", "a", "b", true, "b b", "c", false)
	f.Add("a a a", "a", "b", false, "", "", false)
	f.Add("line1\nline2\nline3\n", "line2\n", "", false, "line3", "LINE3", false)
	f.Add("x\x00y", "x", "z", false, "", "", false)
	f.Add("same", "same", "same", false, "", "", false)
	f.Add("", "a", "b", false, "", "", false)
	f.Add("tab\there\r\n", "tab here", "x", false, "", "", false)
	f.Add("ééé\xff", "é", "e", true, "\xff", "?", false)
	dir := f.TempDir()
	fsys, err := New(Options{Workspace: dir})
	if err != nil {
		f.Fatal(err)
	}
	var n int
	f.Fuzz(func(t *testing.T, content, old1, new1 string, all1 bool, old2, new2 string, all2 bool) {
		n++
		p := filepath.Join(dir, "f"+strconv.Itoa(n))
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(p)
		edits := []Replacement{{Old: old1, New: new1, ReplaceAll: all1}}
		if old2 != "" || new2 != "" {
			edits = append(edits, Replacement{Old: old2, New: new2, ReplaceAll: all2})
		}

		// What the rules say should happen.
		wantKind, want, count := errs.Unknown, content, 0
		for _, e := range edits {
			if e.Old == "" || e.Old == e.New {
				wantKind = errs.Invalid
				break
			}
		}
		if wantKind == errs.Unknown && bytes.IndexByte([]byte(content[:min(len(content), binarySniff)]), 0) >= 0 {
			wantKind = errs.Precondition
		}
		if wantKind == errs.Unknown {
			for _, e := range edits {
				c := strings.Count(want, e.Old)
				if c == 0 {
					wantKind = errs.NotFound
					break
				}
				if c > 1 && !e.ReplaceAll {
					wantKind = errs.Precondition
					break
				}
				n := 1
				if e.ReplaceAll {
					n = -1
				}
				want = strings.Replace(want, e.Old, e.New, n)
				count += c
			}
		}

		res, err := fsys.Edit(t.Context(), p, edits, EditOptions{})
		got := readFile(t, p)
		if wantKind != errs.Unknown {
			if err == nil || errs.KindOf(err) != wantKind {
				t.Fatalf("Edit(%q, %+v) = %v, want an error of kind %s", content, edits, err, kindName(wantKind))
			}
			if got != content {
				t.Fatalf("failed Edit changed the file from %q to %q", content, got)
			}
			return
		}
		if err != nil {
			t.Fatalf("Edit(%q, %+v): %v", content, edits, err)
		}
		if got != want {
			t.Fatalf("Edit(%q, %+v) gave %q, want %q", content, edits, got, want)
		}
		if res.Replacements != count || res.SHA256 != sha(want) {
			t.Fatalf("result %+v, want %d replacements and sha256 %s", res, count, sha(want))
		}
		if got := applyUnified(t, content, res.Diff); got != want {
			t.Fatalf("diff does not turn %q into %q:\n%s", content, want, res.Diff)
		}
	})
}
