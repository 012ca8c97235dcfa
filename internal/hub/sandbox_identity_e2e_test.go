package hub_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
	"github.com/devdepot-ai/agentd/internal/wire"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// TestSandboxKeyElsewhereRefused: a sandbox's key, read from inside it,
// does not let an agentd on another machine open that sandbox's tunnel
// through the hub's public port: it is refused (wrong_endpoint) and every
// call for the conversation still reaches the real sandbox.
func TestSandboxKeyElsewhereRefused(t *testing.T) {
	keyDir := t.TempDir()
	h := startSandboxHub(t, func(o *sandboxes.Options) { o.KeyDir = keyDir })
	ctx := h.ctx("builtin", "c-1")
	real, code, err := h.run(ctx, "cat", "/proc/sys/kernel/hostname")
	if err != nil || code != 0 {
		t.Fatalf("first call: %q %d %v", real, code, err)
	}
	info, err := agentdv1.NewSystemServiceClient(h.cc).Info(ctx, &agentdv1.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := h.Store.Sandbox(t.Context(), info.GetTunnel().GetMachineId())
	if err != nil {
		t.Fatal(err)
	}
	// The key as the hub keeps it: what a sandbox whose key leaked gives.
	seed, err := os.ReadFile(filepath.Join(keyDir, sb.ID, "seed"))
	if err != nil {
		t.Fatalf("the sandbox's key on the hub: %v", err)
	}
	env := []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"),
		wire.EnvSandboxKey + "=" + string(seed), wire.EnvSandboxID + "=" + sb.ID, wire.EnvSandboxOrg + "=acme"}
	impostor := exec.CommandContext(t.Context(), filepath.Join(sandboxtest.AgentdBinary(t), "agentd"), "run", "--mode", "sandbox", "--socket", "-", "--workspace", t.TempDir())
	impostor.Env = append(env, wire.EnvSandboxHub+"="+h.URL)
	impostor.Dir = t.TempDir()
	var logs lockedBuffer
	stderr, err := impostor.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := impostor.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = impostor.Process.Kill(); _ = impostor.Wait() })

	// Wait for the impostor's first answer from the hub, whichever it is.
	verdict := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		var all []string
		for sc.Scan() {
			line := sc.Text()
			all = append(all, line)
			logs.add(line)
			if !sent && (strings.Contains(line, "tunnel to the hub is up") || strings.Contains(line, "refused the tunnel") || strings.Contains(line, "cannot open the tunnel")) {
				verdict <- line
				sent = true
			}
		}
		if !sent {
			verdict <- "agentd ended: " + strings.Join(all, "\n")
		}
	}()
	select {
	case line := <-verdict:
		if !strings.Contains(line, "wrong_endpoint") || !strings.Contains(line, "own socket") {
			t.Errorf("impostor's tunnel: %s; want it refused as wrong_endpoint", line)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the impostor agentd said nothing about its tunnel in 20 s:\n%s", logs.String())
	}
	for i := range 8 {
		got, _, err := h.run(ctx, "cat", "/proc/sys/kernel/hostname")
		if err != nil || got != real {
			t.Errorf("call %d answered by %q (%v), want the sandbox %q", i, got, err, real)
		}
	}
}

// lockedBuffer collects lines from one goroutine for another.
type lockedBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *lockedBuffer) add(line string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, line)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

// TestSandboxSecretsDirNotWorkload: a file the workload drops into the
// secrets directory (LD_PRELOAD among them) becomes no variable of any
// later command in the sandbox.
func TestSandboxSecretsDirNotWorkload(t *testing.T) {
	h := startSandboxHub(t, nil)
	ctx := h.ctx("builtin", "c-1")
	drop := "mkdir -p " + wire.SandboxSecretsDir + " && echo /tmp/evil.so > " + wire.SandboxSecretsDir + "/LD_PRELOAD && echo dropped > " + wire.SandboxSecretsDir + "/DROPPED && echo ok"
	if out, code, err := h.run(ctx, "sh", "-c", drop); err != nil || code != 0 || out != "ok\n" {
		t.Fatalf("the workload's write: %q %d %v", out, code, err)
	}
	out, _, err := h.run(ctx, "sh", "-c", `echo "${LD_PRELOAD-unset} ${DROPPED-unset}"`)
	if err != nil || out != "unset unset\n" {
		t.Errorf("a later command's environment: %q (%v); want neither variable set", out, err)
	}
}

// TestSandboxAgentdNotReadable: the workload (the same uid as agentd)
// cannot read agentd's environment or memory, nor attach to it, while its
// own processes stay dumpable (exec resets the flag).
func TestSandboxAgentdNotReadable(t *testing.T) {
	h := startSandboxHub(t, nil)
	ctx := h.ctx("builtin", "c-1")
	script := `for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = agentd ] && pid=${p#/proc/}; done
[ -n "$pid" ] || { echo "no agentd"; exit 1; }
try() { if "$@" >/dev/null 2>&1; then echo readable; else echo denied; fi; }
echo "environ $(try cat /proc/$pid/environ)"
echo "mem $(try dd if=/proc/$pid/mem bs=1 count=1 skip=4194304)"
echo "fd $(try ls /proc/$pid/fd)"
echo "own $(try cat /proc/self/environ)"`
	out, code, err := h.run(ctx, "sh", "-c", script)
	if err != nil || code != 0 {
		t.Fatalf("probe: %q %d %v", out, code, err)
	}
	if want := "environ denied\nmem denied\nfd denied\nown readable\n"; out != want {
		t.Errorf("what the workload reads of agentd:\n%s\nwant:\n%s", out, want)
	}
}

// TestSandboxKeyNotInSandbox: the sandbox's key is in no process's
// environment there (the engine's init included) and no longer in its key
// mount once agentd has read it; a container started again (agentd died)
// gets it again and comes back.
func TestSandboxKeyNotInSandbox(t *testing.T) {
	keyDir := t.TempDir()
	h := startSandboxHub(t, func(o *sandboxes.Options) { o.KeyDir = keyDir })
	ctx := h.ctx("builtin", "c-1")
	probe := `n=0; for e in /proc/[0-9]*/environ; do tr '\0' '\n' 2>/dev/null <$e | grep -q '^AGENTD_SANDBOX_KEY=' && n=$((n+1)); done
echo "environ $n"; echo "mount $(ls -A ` + sandbox.KeyDir + ` | wc -l)"`
	want := "environ 0\nmount 0\n"
	out, _, err := h.run(ctx, "sh", "-c", probe)
	if err != nil || out != want {
		t.Errorf("where the workload finds the key: %q (%v), want %q", out, err, want)
	}
	info, err := agentdv1.NewSystemServiceClient(h.cc).Info(ctx, &agentdv1.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	seed, err := os.ReadFile(filepath.Join(keyDir, info.GetTunnel().GetMachineId(), "seed"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, string(seed)) {
		t.Error("the seed reached the workload")
	}
	// agentd dies: the hub starts the container again (a fresh /tmp),
	// with its key.
	if _, _, err := h.run(ctx, "touch", "/tmp/before"); err != nil {
		t.Fatal(err)
	}
	_, _, _ = h.run(ctx, "sh", "-c", "kill -9 $PPID")
	out, _, err = h.run(ctx, "sh", "-c", "test -e /tmp/before && echo 'not restarted'; "+probe)
	if err != nil || out != want {
		t.Errorf("after a restart: %q (%v), want %q", out, err, want)
	}
}
