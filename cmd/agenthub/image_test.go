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
		{[]string{"image", "build", "codex", "extra"}, "build takes one profile"},
		{[]string{"image", "nope"}, "not a subcommand (build, dockerfile, ls and prune exist)"},
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
	// The profiles' table ends at the first blank line; the runner images
	// on the engine follow it, and other packages' tests may be building
	// some at this moment.
	table, _, _ := strings.Cut(out, "\n\n")
	if n := strings.Count(strings.TrimSuffix(table, "\n"), "\n") + 1; n != len(agentimage.Profiles())+1 {
		t.Errorf("image ls's profile table has %d lines, want a header and one a profile:\n%s", n, out)
	}
}

// TestImageBuildAndPruneRefuse: bad input is refused before the engine is
// asked, a profile with nothing to build says why, prune never removes
// without a terminal or --yes, and an engine that is not there is named.
func TestImageBuildAndPruneRefuse(t *testing.T) {
	t.Parallel()
	const noEngine = "unix:///nonexistent/docker.sock"
	for _, tc := range []struct {
		args  []string
		usage bool
		want  string
	}{
		{[]string{"image", "build"}, true, "build takes one profile"},
		{[]string{"image", "build", "nope"}, true, `unknown agent profile "nope"`},
		{[]string{"image", "build", "aider", "--docker-host", noEngine}, true, "uses the image docker.io/paulgauthier/aider; nothing to build"},
		{[]string{"image", "build", "commandcode", "--docker-host", noEngine}, true, "agentctl agent run commandcode --image REF"},
		{[]string{"image", "build", "codex", "--project", "mine"}, true, "--project names the images of a --base-dockerfile"},
		{[]string{"image", "build", "codex", "--build-arg", "NOVALUE"}, true, `--build-arg "NOVALUE": want NAME=VALUE`},
		{[]string{"image", "build", "codex", "--build-arg", "NOPE=1", "--docker-host", noEngine}, false, "build argument NOPE: the Dockerfile declares no such ARG"},
		{[]string{"image", "build", "codex", "--base-dockerfile", "-", "--docker-host", noEngine}, false, "a custom base needs a project name"},
		{[]string{"image", "build", "codex", "--docker-host", noEngine}, false, "docker engine not reachable at " + noEngine},
		{[]string{"image", "prune", "--docker-host", noEngine}, false, "docker engine not reachable"},
		{[]string{"image", "prune", "extra"}, true, "prune takes no arguments"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			stdout, _, err := runAgenthub(t, "FROM scratch\n", tc.args...)
			var ue usageError
			if err == nil || !strings.Contains(err.Error(), tc.want) || errors.As(err, &ue) != tc.usage {
				t.Errorf("err = %v (usage error: %v); want %q, usage error %v", err, errors.As(err, &ue), tc.want, tc.usage)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
		})
	}
}

// TestImageLsWithoutEngine: the profiles are listed, LOCAL says "?" and
// stderr says why.
func TestImageLsWithoutEngine(t *testing.T) {
	t.Parallel()
	stdout, stderr, err := runAgenthub(t, "", "image", "ls", "--docker-host", "unix:///nonexistent/docker.sock")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "docker engine not reachable") {
		t.Errorf("stderr %q does not say the engine is not reachable", stderr)
	}
	for _, p := range agentimage.Profiles() {
		if !strings.Contains(stdout, p.Name+" ") {
			t.Errorf("ls lacks profile %s:\n%s", p.Name, stdout)
		}
	}
	if !strings.Contains(stdout, "?") || strings.Contains(stdout, "RUNNER IMAGE") {
		t.Errorf("ls without an engine:\n%s", stdout)
	}
}

// TestImageProfileAlias: "claude", the command people type, names the
// claude-code profile wherever a profile is named.
func TestImageProfileAlias(t *testing.T) {
	t.Parallel()
	byName, _, err := runAgenthub(t, "", "image", "dockerfile", "claude-code")
	if err != nil {
		t.Fatal(err)
	}
	byAlias, _, err := runAgenthub(t, "", "image", "dockerfile", "claude")
	if err != nil {
		t.Fatalf("image dockerfile claude: %v", err)
	}
	if byName == "" || !strings.Contains(byName, "@anthropic-ai/claude-code") {
		t.Fatalf("image dockerfile claude-code printed no claude-code Dockerfile:\n%s", byName)
	}
	if diff := cmp.Diff(byAlias, byName); diff != "" {
		t.Errorf("image dockerfile claude vs claude-code (-got +want):\n%s", diff)
	}
	// build takes it too: past the profile, to the (absent) engine.
	const noEngine = "unix:///nonexistent/docker.sock"
	if _, _, err := runAgenthub(t, "", "image", "build", "claude", "--docker-host", noEngine); err == nil || !strings.Contains(err.Error(), "docker engine not reachable at "+noEngine) {
		t.Errorf("image build claude: %v, want the engine not reachable", err)
	}
}
