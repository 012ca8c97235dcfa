package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/docker"
	"github.com/devdepot-ai/agentd/internal/testbin"
)

// toolsDir holds agentd, agentctl and agenthub, built once by TestMain as
// `make build` builds them: the demo runs the real binaries.
var toolsDir string

func TestMain(m *testing.M) {
	os.Exit(buildToolsAndRun(m))
}

func buildToolsAndRun(m *testing.M) int {
	dir, err := testbin.Temp("agentd", "agentctl", "agenthub")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	toolsDir = dir
	return m.Run()
}

// demoCmd is `agenthub demo ARGS` run from the agenthub binary bin.
func demoCmd(t *testing.T, bin string, args ...string) *exec.Cmd {
	t.Helper()
	return exec.CommandContext(t.Context(), bin, append([]string{"demo"}, args...)...)
}

// TestDemo runs the real `agenthub demo --exit`, with agentd and agentctl
// as its children: the README's first command must keep working, and its
// transcript must read in order.
func TestDemo(t *testing.T) {
	var out, errb bytes.Buffer
	cmd := demoCmd(t, filepath.Join(toolsDir, "agenthub"), "--exit")
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("agenthub demo --exit: %v\n%s%s", err, out.String(), errb.String())
	}
	got := out.String()
	for _, want := range []string{
		"admin: agentctl admin pair-code create  →  ", "machine: agentd pair --hub http://127.0.0.1:",
		"tunnel up", "works on demo-laptop through the hub", "Hello, world!", "3.875", "exit 124", "activity:",
		"/console/ — sign in once with http://127.0.0.1:", "/console/link?code=acl_", "── end of the scripted session ──",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("demo output lacks %q:\n%s", want, got)
		}
	}
	// The sandbox half runs exactly when this machine can run it, and
	// the summary says so either way.
	if why := demoSandboxesHere(t); why == "" {
		for _, want := range []string{
			"sandboxes on: the built-in environment, network none",
			"── the same chat in a sandbox (environment builtin, conversation demo-chat) ──",
			"$ agentctl write -p hello/app.py <<'EOF'\ndef greet(name):\n    return f\"Hello, {name}!\"",
			"Hello, sandbox!\nuid 1000 in /workspace/hello\nthe root file system is read-only\n  exit 0\n",
			"\n45\n  exit 0\n",
			"demo-laptop: 7 of 7 steps as expected\n  sandbox (conversation demo-chat): 3 of 3 steps as expected\n",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("demo output lacks %q:\n%s", want, got)
			}
		}
		// Nothing of the sandbox outlives the demo.
		drv, err := docker.New(docker.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer drv.Close()
		conv := map[string]string{sandbox.LabelConv: demoConversation}
		if left, err := drv.List(t.Context(), conv); err != nil || len(left) > 0 {
			t.Errorf("containers of the demo's conversation left after it: %v (%v)", left, err)
		}
		if left, err := drv.Volumes(t.Context(), conv); err != nil || len(left) > 0 {
			t.Errorf("volumes of the demo's conversation left after it: %v (%v)", left, err)
		}
	} else if want := "demo-laptop: 7 of 7 steps as expected\n  sandbox: skipped — " + why; !strings.Contains(got, want) {
		t.Errorf("demo output lacks %q:\n%s", want, got)
	}
	if strings.Contains(got, "did not succeed") || strings.Contains(got, "In another terminal") {
		t.Errorf("demo --exit reports a failed step or stays up:\n%s", got)
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

// TestDemoMissingBinary: without agentd or agentctl next to agenthub or on
// $PATH, the demo fails at once, naming the missing one and `make build`,
// before it starts anything.
func TestDemoMissingBinary(t *testing.T) {
	for _, tc := range []struct {
		name    string
		beside  []string // the binaries next to agenthub
		missing string
	}{
		{"none", nil, "agentd"},
		{"no agentctl", []string{"agentd"}, "agentctl"},
		{"no agentd", []string{"agentctl"}, "agentd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, name := range append([]string{"agenthub"}, tc.beside...) {
				copyFile(t, filepath.Join(toolsDir, name), filepath.Join(dir, name))
			}
			var out, errb bytes.Buffer
			cmd := demoCmd(t, filepath.Join(dir, "agenthub"), "--exit")
			cmd.Env = append(os.Environ(), "PATH="+t.TempDir())
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("agenthub demo = %v, want exit 1\n%s%s", err, out.String(), errb.String())
			}
			for _, want := range []string{"found no " + tc.missing + " next to agenthub", "make build"} {
				if !strings.Contains(errb.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, errb.String())
				}
			}
			if out.Len() != 0 {
				t.Errorf("the demo started before it found its binaries:\n%s", out.String())
			}
		})
	}
}

// TestFindDemoTools: next to agenthub first, then $PATH.
func TestFindDemoTools(t *testing.T) {
	exe, path, empty := t.TempDir(), t.TempDir(), t.TempDir()
	touchExec(t, filepath.Join(exe, "agentd"))
	touchExec(t, filepath.Join(path, "agentd"))
	touchExec(t, filepath.Join(path, "agentctl"))
	t.Setenv("PATH", path)
	for _, tc := range []struct {
		name, exeDir string
		want         demoTools
		wantErr      string
	}{
		{"beside first, then PATH", exe, demoTools{agentd: filepath.Join(exe, "agentd"), agentctl: filepath.Join(path, "agentctl")}, ""},
		{"PATH only", empty, demoTools{agentd: filepath.Join(path, "agentd"), agentctl: filepath.Join(path, "agentctl")}, ""},
		{"unknown exe dir", "", demoTools{agentd: filepath.Join(path, "agentd"), agentctl: filepath.Join(path, "agentctl")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := findDemoTools(tc.exeDir)
			if err != nil {
				t.Fatalf("findDemoTools(%q): %v", tc.exeDir, err)
			}
			if diff := cmp.Diff(got, tc.want, cmp.AllowUnexported(demoTools{})); diff != "" {
				t.Errorf("findDemoTools(%q) (-got +want):\n%s", tc.exeDir, diff)
			}
		})
	}
	t.Setenv("PATH", empty)
	if _, err := findDemoTools(exe); !errors.Is(err, errDemoTool) || !strings.Contains(err.Error(), "found no agentctl") {
		t.Errorf("findDemoTools without agentctl = %v, want errDemoTool naming agentctl", err)
	}
}

func touchExec(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
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

// demoSandboxesHere is what the demo says of its sandbox half on this
// machine ("" when it runs one), found as the demo finds it.
func demoSandboxesHere(t *testing.T) string {
	t.Helper()
	_, closeFn, why := demoSandboxes(t.Context(), t.TempDir(), filepath.Join(toolsDir, "agentd"))
	closeFn()
	return why
}
