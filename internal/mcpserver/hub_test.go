//go:build unix

package mcpserver_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/devdepot-ai/agentd/internal/activity"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// TestThroughHub: agentctl mcp --hub --machine reaches a real agentd
// paired with a real hub over its tunnel; results and isError results
// come back through it, and the daemon records the hub's actor (the
// token's name). The hub records the MCP client (agentd-client) in its
// own records; it does not forward it to the daemon.
func TestThroughHub(t *testing.T) {
	t.Parallel()
	h := hubtest.Start(t, hubtest.Options{Actor: "mcp-admin"})
	cc, err := grpc.NewClient(h.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	admin := hubv1.NewAdminServiceClient(cc)
	actx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+h.Token)
	code, err := admin.CreatePairingCode(actx, &hubv1.CreatePairingCodeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	state, ws := filepath.Join(dir, "state"), filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "HOME="+dir, "SHELL=/bin/sh", "AGENTD_CONFIG_DIR="+filepath.Join(dir, "config"), "AGENTD_STATE_DIR="+state)
	pair := exec.Command(agentdBin, "pair", "--hub", h.URL, "--code", code.GetCode())
	pair.Env = env
	out, err := pair.Output()
	if err != nil {
		t.Fatalf("agentd pair: %v", err)
	}
	machine := strings.TrimSpace(string(out))
	run := exec.Command(agentdBin, "run", "--workspace", ws)
	run.Env = env
	var logs bytes.Buffer
	run.Stdout, run.Stderr = &logs, &logs
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = run.Process.Signal(os.Interrupt)
		_ = run.Wait()
		if t.Failed() {
			t.Logf("agentd run:\n%s", logs.String())
		}
	})
	online := func() bool {
		resp, err := admin.ListMachines(actx, &hubv1.ListMachinesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range resp.GetMachines() {
			if m.GetId() == machine {
				return m.GetStatus() == hubv1.MachineStatus_MACHINE_STATUS_ONLINE
			}
		}
		return false
	}
	for deadline := time.Now().Add(20 * time.Second); !online(); {
		if time.Now().After(deadline) {
			t.Fatal("the machine did not come online in 20s")
		}
		time.Sleep(50 * time.Millisecond) // polling the hub's view, not synchronising
	}

	tokFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokFile, []byte(h.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(agentctl, "--hub", h.URL, "--machine", machine, "--token-file", tokFile, "mcp")
	cmd.Stderr = &testWriter{t: t}
	client := mcp.NewClient(&mcp.Implementation{Name: "hub-client", Version: "3"}, nil)
	sess, err := client.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	txt, st, isErr := call(t, sess, "sh", map[string]any{"command": "echo via-hub > f.txt; cat f.txt; exit 4"})
	if isErr || st["exit_code"] != 4.0 || !strings.HasPrefix(txt, "via-hub\n[exit code 4; id p-") {
		t.Errorf("sh through the hub: %v %v %q", isErr, st, txt)
	}
	if txt, _, isErr := call(t, sess, "read_file", map[string]any{"path": "gone.txt"}); !isErr || !strings.Contains(txt, "gone.txt does not exist") {
		t.Errorf("read_file of a missing file through the hub: %v %q", isErr, txt)
	}

	b, err := os.ReadFile(filepath.Join(state, activity.FileName))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var r activity.Record
		if json.Unmarshal(line, &r) == nil && r.Kind == "process.start" {
			found = true
			if r.Actor != "mcp-admin" {
				t.Errorf("process.start through the hub: actor %q, want mcp-admin", r.Actor)
			}
		}
	}
	if !found {
		t.Error("no process.start record in the daemon's audit log")
	}
}
