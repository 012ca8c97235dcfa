package replica_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/devdepot-ai/agentd/agentd"
	"github.com/devdepot-ai/agentd/internal/ctl"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/replica"
	"github.com/devdepot-ai/agentd/transport"
)

// runMachine pairs a real agentd with h and runs it (its tunnel on h);
// it returns the machine's ID and its workspace.
func runMachine(t testing.TB, h *hubtest.Hub) (id, ws string) {
	t.Helper()
	dir := t.TempDir()
	cfg, ws := filepath.Join(dir, "config"), filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := agentd.Pair(t.Context(), agentd.PairOptions{Hub: h.URL, Code: pairCode(t, h), ConfigDir: cfg, Name: "box"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- agentd.Run(ctx, agentd.RunOptions{
			Server: agentd.Options{
				Workspace: ws, StateDir: filepath.Join(dir, "state"), Env: os.Environ(),
				Logger: zaptest.NewLogger(t).Named("agentd"),
			},
			ConfigDir: cfg, Socket: "-",
			Backoff: transport.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond, Rejected: time.Hour},
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return m.MachineID, ws
}

// agentctl runs agentctl in-process against h, with stdin in.
func agentctl(t *testing.T, h *hubtest.Hub, machine, in string, args ...string) (int, string, string) {
	t.Helper()
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(h.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := ctl.Main(t.Context(), append([]string{"--hub", h.URL, "--machine", machine, "--token-file", tf}, args...),
		ctl.IO{In: strings.NewReader(in), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

// TestForwardToTheReplicaHoldingTheTunnel: a machine's tunnel is on B; a
// client on A reaches it through A, for unary calls, server and client
// streams, and Attach.
func TestForwardToTheReplicaHoldingTheTunnel(t *testing.T) {
	t.Parallel()
	a, b := twoReplicas(t, hubtest.Options{Replica: &replica.Options{Heartbeat: 100 * time.Millisecond}})
	id, ws := runMachine(t, b)
	eventually(t, 10*time.Second, "the machine online, seen from A", func() bool {
		code, out, _ := agentctl(t, a, "", "", "machines")
		return code == 0 && strings.Contains(out, id) && strings.Contains(out, "online")
	})

	steps := []struct {
		name     string
		in       string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{"exec: output streams and exit code", "", []string{"sh", "echo out; echo err >&2; exit 3"}, 3, "out\n", "err\n"},
		{"write: a client stream", "hello from A\n", []string{"write", "note.txt"}, 0, "", ""},
		{"read it back", "", []string{"read", "note.txt"}, 0, "hello from A\n", ""},
		{"stdin through two hops", "piped\n", []string{"exec", "--stdin", "--", "cat"}, 0, "piped\n", ""},
	}
	for _, st := range steps {
		code, out, errOut := agentctl(t, a, id, st.in, st.args...)
		if code != st.wantCode || out != st.wantOut || errOut != st.wantErr {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want %d, %q, %q", st.name, code, out, errOut, st.wantCode, st.wantOut, st.wantErr)
		}
	}
	if b, err := os.ReadFile(filepath.Join(ws, "note.txt")); err != nil || string(b) != "hello from A\n" {
		t.Errorf("note.txt on the machine: %q, %v", b, err)
	}

	// Attach, through A, to a process started through B.
	var big strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&big, "line %d\n", i)
	}
	if code, _, errOut := agentctl(t, b, id, "", "sh", "for i in $(seq 0 1999); do echo line $i; done"); code != 0 {
		t.Fatalf("exec through B: %d %s", code, errOut)
	}
	code, out, errOut := agentctl(t, a, id, "", "ps")
	if code != 0 || out == "" {
		t.Fatalf("ps through A: %d %q %s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	pid := strings.Fields(lines[len(lines)-1])[0]
	code, out, errOut = agentctl(t, a, id, "", "attach", pid, "--from", "0")
	if code != 0 || out != big.String() {
		t.Errorf("attach --from 0 through A: exit %d, %d bytes (want %d), stderr %q", code, len(out), big.Len(), errOut)
	}
}
