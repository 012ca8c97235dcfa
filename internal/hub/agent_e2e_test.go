package hub_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/devdepot-ai/agentd/internal/agentimage"
	"github.com/devdepot-ai/agentd/internal/hub"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
)

// agentProfile decodes a test profile; "%s" in js is the profile's name.
func agentProfile(t *testing.T, name, js string) agentimage.Profile {
	t.Helper()
	p, err := agentimage.ParseProfile([]byte(fmt.Sprintf(js, name, name)))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const (
	// A builder profile whose "agent" is the image's sh, with an allow list.
	builderProfile = `{"name": %q, "slug": %q, "display_name": "Fixture", "executable": "sh", "strategy": "builder",
	  "install": {"script": ["true"]}, "limits": {"cpus": 0.5, "memory_mib": 256, "pids": 64},
	  "network": {"default": "allow", "allow": ["api.example.com"]}, "ttl": "1h", "sensitivity": "low",
	  "risk_notes": ["A test fixture."]}`
	// An official image that is not on the engine (none can be pulled here).
	officialProfile = `{"name": %q, "slug": %q, "display_name": "Official", "executable": "sh", "strategy": "image",
	  "image": "registry.example.invalid/acme/agent", "limits": {"cpus": 0.5, "memory_mib": 256, "pids": 64},
	  "network": {"default": "none"}, "ttl": "1h", "sensitivity": "low", "risk_notes": ["A test fixture."]}`
	customProfile = `{"name": %q, "slug": %q, "display_name": "Bring your own", "executable": "sh", "strategy": "custom",
	  "limits": {"cpus": 0.5, "memory_mib": 256, "pids": 64}, "network": {"default": "none"}, "ttl": "1h",
	  "sensitivity": "high", "risk_notes": ["A test fixture."]}`
)

// agentctl agent ls | run against a real hub running real sandboxes: the
// profile's image by id and limits, argv-safe runs that keep exit code,
// stderr and timeout, the restricted network, refusals that name the fix,
// the run in the org's activity, and removal when the TTL ends.
func TestAgentRun(t *testing.T) {
	minimal := sandboxtest.MinimalImage(t)
	// The fixture's "built" runner image: the busybox-only image under the
	// name agenthub image build gives it.
	runner := "agentd/runner-managed:fixture-latest"
	build := exec.Command("docker", "build", "-q", "-t", runner, "-")
	build.Stdin = strings.NewReader("FROM " + minimal + "\nLABEL " + agentimage.LabelPrefix + "input.agent=script:fixture@1.2.3\n")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", runner).Run() })
	imageID, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", runner).Output()
	if err != nil {
		t.Fatal(err)
	}
	runnerID := strings.TrimSpace(string(imageID))

	var skew atomic.Int64 // the hub's clock runs this far ahead
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	h := startSandboxHubWith(t, func(o *sandboxes.Options) {
		o.StopAfter = 2 * time.Second // the background work ticks every 500 ms
		o.Releases = releases{"fixture": "1.10.0"}
		o.Agents = []agentimage.Profile{
			agentProfile(t, "fixture", builderProfile),
			agentProfile(t, "absent", builderProfile),
			agentProfile(t, "byo", customProfile),
			agentProfile(t, "official", officialProfile),
		}
	}, hubtest.Options{Now: now})
	run := h.agentctl()

	code, out, errs := run("agent", "ls")
	if code != 0 {
		t.Fatalf("agent ls: %d %s", code, errs)
	}
	for _, want := range []string{
		"absent    sh          builder   no: agenthub image build absent",
		"byo       sh          custom    --image required",
		"fixture   sh          builder   yes",
		"official  sh          image     no: docker pull registry.example.invalid/acme/agent",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("agent ls lacks %q:\n%s", want, out)
		}
	}

	// With argv: the agent's executable runs them, no shell in between;
	// exit code and stderr as exec reports them; the allow list's notice.
	code, out, errs = run("agent", "run", "fixture", "--", "-c", `echo "$0|$1"; echo err >&2; exit 3`, "x", "a b; id")
	if code != 3 || out != "x|a b; id\n" || !strings.Contains(errs, "err\n") {
		t.Errorf("agent run fixture -- … = %d %q %q; want 3, 'x|a b; id', err", code, out, errs)
	}
	if !strings.Contains(errs, "note: the sandbox reaches only api.example.com:443, through the hub's egress proxy (HTTPS_PROXY=http://127.0.0.1:3128)") {
		t.Errorf("no notice of the allow list: %q", errs)
	}
	if !strings.Contains(errs, "note: fixture 1.10.0 is out; this image has 1.2.3 (the version is pinned: 'agenthub image build fixture --agent-version 1.10.0'") {
		t.Errorf("no notice of the newer release: %q", errs)
	}
	if code, _, errs := run("agent", "run", "fixture", "--timeout", "1s", "--", "-c", "sleep 30"); code != 124 {
		t.Errorf("agent run with a timeout = %d (%s), want 124", code, errs)
	}

	// Without argv: the sandbox id alone; it is a machine id, with the
	// profile's limits, no network (the allow list goes through the egress
	// proxy: see TestAgentEgressAllowList), the runner image by id, an end.
	code, out, errs = run("agent", "run", "fixture", "--ttl", "10m")
	id := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(id, "sb-") || strings.Contains(id, "\n") {
		t.Fatalf("agent run fixture = %d %q %q; want an sb- id alone", code, out, errs)
	}
	if want := "agentctl: sandbox " + id + " from image " + runnerID + " (until "; !strings.Contains(errs, want) {
		t.Errorf("agent run's stderr %q lacks %q", errs, want)
	}
	sb, err := h.Store.Sandbox(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if sb.Environment != "agent:fixture" || sb.Image != runnerID ||
		sb.ExpiresAt.Sub(sb.CreatedAt) != 10*time.Minute {
		t.Errorf("stored sandbox %+v; want environment agent:fixture, an image id, 10m to its end", sb)
	}
	code, out, _ = run("--machine", id, "sh", "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max; ls /sys/class/net")
	if code != 0 || out != fmt.Sprint(256<<20)+"\nlo\n" {
		t.Errorf("in the agent's sandbox: %d %q; want the profile's 256 MiB and only lo", code, out)
	}
	lastUse := time.Now()
	code, out, _ = run("--machine", id, "sh", `echo "$HOME $XDG_CONFIG_HOME $XDG_CACHE_HOME"; touch "$HOME/x" && stat -c '%u %a' "$HOME"`)
	if code != 0 || out != "/workspace/.home /workspace/.home/.config /workspace/.home/.cache\n1000 700\n" {
		t.Errorf("the agent's HOME: %d %q; want /workspace/.home (XDG below it), the sandbox user's, writable", code, out)
	}
	if code, out, _ := run("sandbox", "ls"); code != 0 || !regexp.MustCompile(`(?m)^`+id+`  agent:fixture .* `+runnerID+`$`).MatchString(out) {
		t.Errorf("sandbox ls = %d:\n%s", code, out)
	}

	// Refusals name the fix and make nothing.
	before, _ := h.Store.ListSandboxes(t.Context(), "")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"agent", "run", "absent"}, 1, "is not on this hub's Docker engine: run 'agenthub image build absent' on the hub's host"},
		{[]string{"agent", "run", "byo"}, 1, "byo has no default image: give one with --image REF"},
		{[]string{"agent", "run", "official"}, 1, "the image registry.example.invalid/acme/agent of official is not on this hub's Docker engine: run 'docker pull registry.example.invalid/acme/agent' on the hub's host"},
		{[]string{"agent", "run", "nope"}, 1, `unknown agent profile "nope" (known: fixture, absent, byo, official)`},
		{[]string{"agent", "run", "fixture", "--network", "wide"}, 1, `network "wide": want open`},
		{[]string{"agent", "run", "fixture", "--ttl", "30s"}, 1, "ttl 30s: want 1m0s to 24h0m0s"},
		// No public network on this hub: refused, never run on another.
		{[]string{"agent", "run", "fixture", "--network", "open"}, 1, "needs the public network, which this hub has not set up"},
		{[]string{"agent", "run"}, 2, "agent run takes one PROFILE"},
	} {
		code, out, errs := run(tc.args...)
		if code != tc.code || out != "" || !strings.Contains(errs, tc.want) {
			t.Errorf("%v = %d %q %q; want %d and %q", tc.args, code, out, errs, tc.code, tc.want)
		}
	}
	after, _ := h.Store.ListSandboxes(t.Context(), "")
	if len(after) != len(before) {
		t.Errorf("refused runs left sandboxes: %d before, %d after", len(before), len(after))
	}

	// A custom profile runs the image given.
	if code, out, errs := run("agent", "run", "byo", "--image", runner, "--", "-c", "id -u"); code != 0 || out != "1000\n" {
		t.Errorf("agent run byo --image = %d %q %q", code, out, errs)
	}

	// The runs are in the org's activity.
	code, out, _ = run("activity")
	if code != 0 || strings.Count(out, "ran agent fixture in sb-") < 3 || !strings.Contains(out, "ran agent fixture in "+id+" (image "+runner+", id "+runnerID+", network allow api.example.com:443, ttl 10m0s)") {
		t.Errorf("activity = %d, want the runs:\n%s", code, out)
	}

	// Idle longer than the hub's idle TTL (2 s, reaped every 500 ms), it
	// stays: an agent's sandbox goes at its end, not when idle. (Waiting
	// out a span of time is what this checks, not a synchronisation.)
	if d := 3*time.Second - time.Since(lastUse); d > 0 {
		time.Sleep(d)
	}
	if _, err := h.Store.Sandbox(t.Context(), id); err != nil {
		t.Fatalf("the agent's sandbox went before its end, idle %s: %v", time.Since(lastUse).Round(time.Second), err)
	}
	// Its end: removed (container, volume, row) once the hub's clock passes
	// it, used or not.
	skew.Store(int64(11 * time.Minute))
	pollUntil(t, 10*time.Second, "the agent's sandbox removed at its end", func() (bool, string) {
		_, err := h.Store.Sandbox(t.Context(), id)
		return errors.Is(err, store.ErrNotFound), fmt.Sprintf("row: %v", err)
	})
	h.assertGone(id, sb.ContainerID)
}

// releases is a ReleaseResolver with fixed answers; a profile it does not
// know is an error (as offline), which is no notice.
type releases map[string]string

func (r releases) Latest(_ context.Context, p agentimage.Profile) (string, error) {
	if v, ok := r[p.Name]; ok {
		return v, nil
	}
	return "", errors.New("offline")
}

// syncBuffer is a bytes.Buffer safe for the hub's logger and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A secret reference: the hub resolves it, the agent's commands get the
// value, and it appears in no hub log, activity record, container
// configuration or container log; references that are not, or name what
// is not there, are refused and make nothing.
func TestAgentRunSecrets(t *testing.T) {
	minimal := sandboxtest.MinimalImage(t)
	runner := "agentd/runner-managed:secretfixture-latest"
	if out, err := exec.Command("docker", "tag", minimal, runner).CombinedOutput(); err != nil {
		t.Fatalf("docker tag: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", runner).Run() })

	secretDir := t.TempDir()
	value := fmt.Sprintf("sk-test-%d", time.Now().UnixNano())
	if err := os.MkdirAll(filepath.Join(secretDir, "team"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secretDir, "team", "openai"), []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	logger := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&logs), zapcore.DebugLevel))
	h := startSandboxHubWith(t, func(o *sandboxes.Options) {
		o.Agents = []agentimage.Profile{agentProfile(t, "secretfixture", builderProfile)}
	}, hubtest.Options{Secrets: hub.DirSecrets{Dir: secretDir}, Logger: logger})
	run := h.agentctl()

	code, out, errs := run("agent", "run", "secretfixture", "--secret", "OPENAI_API_KEY=ref:team/openai", "--",
		"-c", `echo "$OPENAI_API_KEY"`)
	if code != 0 || out != value+"\n" {
		t.Fatalf("the secret in the agent's command: %d %q %q; want %q", code, out, errs, value)
	}
	id := regexp.MustCompile(`sandbox (sb-[a-z0-9]+)`).FindStringSubmatch(errs)
	if id == nil {
		t.Fatalf("no sandbox id in %q", errs)
	}
	// A later command gets it too (it lives on the sandbox's tmpfs).
	if code, out, _ := run("--machine", id[1], "exec", "--", "sh", "-c", `echo "$OPENAI_API_KEY"; ls /workspace`); code != 0 || out != value+"\n" {
		t.Errorf("a later command: %d %q", code, out)
	}

	sb, err := h.Store.Sandbox(t.Context(), id[1])
	if err != nil {
		t.Fatal(err)
	}
	inspect, err := exec.Command("docker", "inspect", sb.ContainerID).CombinedOutput()
	if err != nil {
		t.Fatalf("docker inspect: %v", err)
	}
	ctrLogs, _ := exec.Command("docker", "logs", sb.ContainerID).CombinedOutput()
	_, activityJSON, _ := run("--json", "activity")
	_, activityText, _ := run("activity")
	for what, text := range map[string]string{
		"docker inspect": string(inspect), "the container's log": string(ctrLogs), "the hub's log": logs.String(),
		"activity --json": activityJSON, "activity": activityText,
	} {
		if strings.Contains(text, value) {
			t.Errorf("the secret's value appears in %s", what)
		}
	}
	if !strings.Contains(activityText, "secrets OPENAI_API_KEY") {
		t.Errorf("the run's activity does not name its secrets:\n%s", activityText)
	}

	before, _ := h.Store.ListSandboxes(t.Context(), "")
	for _, tc := range []struct {
		secret string
		code   int
		want   string
	}{
		{"OPENAI_API_KEY=" + value, 2, "--secret OPENAI_API_KEY: want NAME=ref:PATH"},
		{"OPENAI_API_KEY=ref:team/nope", 1, "no such secret"},
		{"OPENAI_API_KEY=ref:../team/openai", 1, "secret reference"},
		{"AGENTD_SANDBOX_KEY=ref:team/openai", 1, "not AGENTD_*"},
		{"LD_PRELOAD=ref:team/openai", 1, "changes what programs run or load"},
	} {
		code, out, errs := run("agent", "run", "secretfixture", "--secret", tc.secret)
		if code != tc.code || out != "" || !strings.Contains(errs, tc.want) || strings.Contains(errs, value) {
			t.Errorf("--secret %s = %d %q %q; want %d and %q, never the value", tc.secret, code, out, errs, tc.code, tc.want)
		}
	}
	if after, _ := h.Store.ListSandboxes(t.Context(), ""); len(after) != len(before) {
		t.Errorf("refused runs left sandboxes: %d before, %d after", len(before), len(after))
	}
}
