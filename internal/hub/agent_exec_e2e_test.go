package hub_test

import (
	"bufio"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/devdepot-ai/agentd/internal/agentimage"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// agentctlLine matches the lines agentctl agent run adds on stderr before
// the agent runs: its notices and the sandbox it made.
var agentctlLine = regexp.MustCompile(`(?m)^agentctl: (note: .*|sandbox (sb-[a-z0-9]+) .*)\n`)

// agentctl agent run PROFILE -- ARGS against a real hub and real sandboxes
// ends exactly as agentctl exec of the same argv in the same sandbox: the
// same exit code, stdout and stderr (less agentctl's own lines before the
// run), 124 on --timeout, 128+N on a signal, 125 when agentctl itself
// failed, and the same truncation state (what was retained and omitted of
// an output longer than the daemon keeps). Removing the run's sandbox
// removes its container and workspace volume.
func TestAgentRunLikeExec(t *testing.T) {
	minimal := sandboxtest.MinimalImage(t)
	runner := "agentd/runner-managed:execfixture-latest"
	if out, err := exec.Command("docker", "tag", minimal, runner).CombinedOutput(); err != nil {
		t.Fatalf("docker tag: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", runner).Run() })
	h := startSandboxHubWith(t, func(o *sandboxes.Options) {
		o.Agents = []agentimage.Profile{
			agentProfile(t, "execfixture", builderProfile),
			agentProfile(t, "execabsent", builderProfile),
		}
	}, hubtest.Options{})
	run := h.agentctl()

	// 6 MB: more than the daemon retains of a stream (1 MiB head, 4 MiB
	// tail), all of which a live follower still gets.
	const long = `head -c 6000000 /dev/zero | tr '\0' x; echo; echo last line; echo done >&2`
	for _, tc := range []struct {
		name  string
		flags []string // of agent run and exec alike
		json  bool
		args  []string // after the executable, sh
		code  int
	}{
		{name: "exit code and stderr", args: []string{"-c", `echo out; echo err >&2; echo "$1" >&2; exit 3`, "sh", "a b; id"}, code: 3},
		{name: "success", args: []string{"-c", "echo ok"}, code: 0},
		{name: "signal", args: []string{"-c", "echo before; kill -TERM $$"}, code: 128 + 15},
		{name: "timeout", flags: []string{"--timeout", "1s"}, args: []string{"-c", "echo before; echo err >&2; sleep 30"}, code: 124},
		{name: "long output", args: []string{"-c", long}, code: 0},
		{name: "long output json", json: true, args: []string{"-c", long + "; exit 4"}, code: 4},
		{name: "timeout json", json: true, flags: []string{"--timeout", "1s"}, args: []string{"-c", "sleep 30"}, code: 124},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var global []string
			if tc.json {
				global = []string{"--json"}
			}
			agentArgs := append(append(append(global, "agent", "run", "execfixture"), tc.flags...), "--")
			code, out, errs := run(append(agentArgs, tc.args...)...)
			id := sandboxOf(t, errs)
			errs = agentctlLine.ReplaceAllString(errs, "")

			execArgs := append(append(append(global, "--machine", id, "exec"), tc.flags...), "--", "sh")
			execCode, execOut, execErrs := run(append(execArgs, tc.args...)...)
			if execCode != tc.code || code != tc.code {
				t.Errorf("exit codes: agent run %d, exec %d; want %d (agent run stderr %q)", code, execCode, tc.code, truncate(errs))
			}
			if !tc.json {
				if out != execOut || errs != execErrs {
					t.Errorf("agent run printed %q / %q; exec %q / %q", truncate(out), truncate(errs), truncate(execOut), truncate(execErrs))
				}
				return
			}
			// JSON: the same events; the exit's figures (less when and how
			// long) are the same, and say what was not retained.
			got, want := exited(t, out), exited(t, execOut)
			if diff := cmp.Diff(got, want, protocmp.Transform(),
				protocmp.IgnoreFields(&agentdv1.Exited{}, "duration", "end_time")); diff != "" {
				t.Errorf("agent run's exit event differs from exec's (-agent run +exec):\n%s", diff)
			}
			if errs != execErrs {
				t.Errorf("stderr: agent run %q, exec %q", truncate(errs), truncate(execErrs))
			}
		})
	}
	// The long output reached agent run whole, and its stats say that the
	// daemon kept 5 MiB of it.
	code, out, errs := run("--json", "agent", "run", "execfixture", "--", "-c", long)
	x := exited(t, out)
	if code != 0 || len(x.GetStreams()) == 0 {
		t.Fatalf("agent run of the long output: %d, exit event %v", code, x)
	}
	if st := x.GetStreams()[0]; st.GetTotalBytes() != int64(6000000+len("\nlast line\n")) || st.GetOmittedBytes() != st.GetTotalBytes()-5<<20 {
		t.Errorf("stdout's stats %v; want 6000011 bytes, all but 5 MiB omitted from retention", st)
	}

	// sandbox rm of the run's sandbox removes its container and its
	// workspace volume.
	sb, err := h.Store.Sandbox(t.Context(), sandboxOf(t, errs))
	if err != nil {
		t.Fatal(err)
	}
	if code, out, errs := run("sandbox", "rm", sb.ID); code != 0 || out != "" {
		t.Errorf("sandbox rm %s = %d %q %q", sb.ID, code, out, errs)
	}
	h.assertGone(sb.ID, sb.ContainerID)

	// agentctl's own failure is 125 with arguments, as exec's, never an exit
	// code the agent could have given.
	if code, _, errs := run("agent", "run", "execabsent", "--", "-c", "exit 0"); code != 125 || !strings.Contains(errs, "agenthub image build execabsent") {
		t.Errorf("agent run of a missing image with arguments = %d %q; want 125 naming the build", code, errs)
	}
	if code, _, _ := run("--machine", "sb-nosuchsandbox", "exec", "--", "true"); code != 125 {
		t.Errorf("exec on no machine = %d, want 125", code)
	}
	// Without arguments it is an ordinary command: 1.
	if code, _, _ := run("agent", "run", "execabsent"); code != 1 {
		t.Errorf("agent run of a missing image without arguments = %d, want 1", code)
	}
}

// sandboxOf is the sandbox id in agent run's stderr.
func sandboxOf(t *testing.T, stderr string) string {
	t.Helper()
	for _, m := range agentctlLine.FindAllStringSubmatch(stderr, -1) {
		if m[2] != "" {
			return m[2]
		}
	}
	t.Fatalf("no sandbox line in agent run's stderr: %q", truncate(stderr))
	return ""
}

// exited is the exit event in agentctl --json's output of a process.
func exited(t *testing.T, out string) *agentdv1.Exited {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var ev agentdv1.ProcessEvent
		if err := protojson.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("a line of agentctl --json: %v: %s", err, truncate(sc.Text()))
		}
		if x := ev.GetExited(); x != nil {
			return x
		}
	}
	t.Fatalf("no exit event in %s", truncate(out))
	return nil
}

// truncate keeps test messages short.
func truncate(s string) string {
	if len(s) > 300 {
		return s[:150] + "…" + s[len(s)-150:]
	}
	return s
}
