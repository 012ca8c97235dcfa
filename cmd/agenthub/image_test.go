package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/devdepot-ai/agentd/internal/agentimage"
)

// runAgenthub runs the agenthub command line in-process.
func runAgenthub(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errb)
	err = root.ExecuteContext(t.Context())
	return out.String(), errb.String(), err
}

// TestImageDockerfile: the command prints exactly what the package renders.
func TestImageDockerfile(t *testing.T) {
	t.Parallel()
	const base = "FROM docker.io/library/debian:bookworm-slim\nRUN true\n"
	for _, tc := range []struct {
		args  []string
		stdin string
		opts  agentimage.RenderOptions
	}{
		{args: []string{"codex"}},
		{args: []string{"claude-code", "--docker", "--agent-version", "2.0.0", "--uid", "1001", "--gid", "1002"},
			opts: agentimage.RenderOptions{Docker: true, AgentVersion: "2.0.0", UID: 1001, GID: 1002}},
		{args: []string{"pi", "--base-dockerfile", "-"}, stdin: base, opts: agentimage.RenderOptions{CustomBase: base}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			out, _, err := runAgenthub(t, tc.stdin, append([]string{"image", "dockerfile"}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			p, err := agentimage.Lookup(tc.args[0])
			if err != nil {
				t.Fatal(err)
			}
			want, err := agentimage.Render(p, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(out, want); diff != "" {
				t.Errorf("stdout (-got +want):\n%s", diff)
			}
		})
	}
}

// TestImageUsageErrors: mistakes on the command line are usage errors, which
// main turns into exit status 2.
func TestImageUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"image", "dockerfile", "copilot"}, `unknown agent profile "copilot" (known: aider, claude-code, codex, commandcode, goose, opencode, pi)`},
		{[]string{"image", "dockerfile", "aider"}, "aider uses the image docker.io/paulgauthier/aider; nothing to build"},
		{[]string{"image", "dockerfile", "commandcode"}, "--image REF"},
		{[]string{"image", "dockerfile"}, "dockerfile takes one profile"},
		{[]string{"image", "dockerfile", "codex", "--agent-version", "1 2"}, `agent version "1 2"`},
		{[]string{"image", "dockerfile", "codex", "--no-such-flag"}, "unknown flag"},
		{[]string{"image", "build", "codex"}, "build and prune come later"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			out, _, err := runAgenthub(t, "", tc.args...)
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v (%T), want a usage error containing %q", err, err, tc.want)
			}
			if out != "" {
				t.Errorf("stdout on error: %q", out)
			}
		})
	}
}

func TestImageLs(t *testing.T) {
	t.Parallel()
	out, _, err := runAgenthub(t, "", "image", "ls")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"PROFILE", "codex", "built: npm @openai/codex@", "docker.io/paulgauthier/aider", "ghcr.io/block/goose", "--image required",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("image ls lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\n"); n != len(agentimage.Profiles())+1 {
		t.Errorf("image ls has %d lines, want a header and one a profile:\n%s", n, out)
	}
}
