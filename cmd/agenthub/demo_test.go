package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestDemo runs `agenthub demo --exit` in-process: the README's first
// command must keep working, and its transcript must read in order.
func TestDemo(t *testing.T) {
	var out, errb bytes.Buffer
	if err := runDemo(t.Context(), "127.0.0.1:0", true, &out, &errb); err != nil {
		t.Fatalf("demo: %v\n%s%s", err, out.String(), errb.String())
	}
	got := out.String()
	for _, want := range []string{"tunnel up", "Hello, world!", "3.875", "exit 124", "activity:", "/console/ — sign in once with http://127.0.0.1:", "/console/link?code=acl_"} {
		if !strings.Contains(got, want) {
			t.Errorf("demo output lacks %q:\n%s", want, got)
		}
	}
	// Code is shown as code: no escaped newlines, the file as a
	// here-document, the Python as a block of lines.
	if strings.Contains(got, `\n`) {
		t.Errorf("demo output has an escaped newline:\n%s", got)
	}
	for _, want := range []string{
		"$ agentctl write -p hello/app.py <<'EOF'\ndef greet(name):\n",
		"\nEOF\n  exit 0\n",
		"$ agentctl python --session demo -c 'import statistics\ndata = [3, 1, 4, 1, 5, 9, 2, 6]\nstatistics.mean(data)'\n3.875\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("demo output lacks %q:\n%s", want, got)
		}
	}
	// Each step's activity comes after its output and its exit status,
	// and before the next step.
	for _, step := range []struct{ output, activity, next string }{
		{"+    return f\"Hello, {name}!\"", "edited ", "Checking where greet is used."},
		{"Hello, world!\n  exit 0\n", "→ exit 0", "Computing something in a Python session."},
		{"3.875\n  exit 0\n", "ran Python (session demo)", "Taking a snapshot"},
		{"exit 124\n", "→ error: timed out", "end of the scripted session"},
	} {
		o := strings.Index(got, step.output)
		a := strings.Index(got, step.activity)
		n := strings.Index(got, step.next)
		if o < 0 || a < 0 || n < 0 || !(o < a && a < n) {
			t.Errorf("want %q, then its activity %q, then %q; at %d, %d, %d:\n%s", step.output, step.activity, step.next, o, a, n, got)
		}
	}
}

func TestCommandLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args  []string
		stdin string
		want  string
	}{
		{[]string{"grep", "greet", "hello"}, "", "$ agentctl grep greet hello"},
		{[]string{"sh", "echo 'hi' $X"}, "", `$ agentctl sh 'echo '\''hi'\'' $X'`},
		{[]string{"python", "-c", "a = 1\na"}, "", "$ agentctl python -c 'a = 1\na'"},
		{[]string{"write", "f"}, "x\ny\n", "$ agentctl write f <<'EOF'\nx\ny\nEOF"},
		{[]string{"write", "f"}, "no newline", "$ agentctl write f <<'EOF'\nno newline\nEOF"},
	} {
		if got := commandLine(tc.args, tc.stdin); got != tc.want {
			t.Errorf("commandLine(%q, %q) =\n%s\nwant\n%s", tc.args, tc.stdin, got, tc.want)
		}
	}
}
