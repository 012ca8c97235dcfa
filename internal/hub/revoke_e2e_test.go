package hub_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/devdepot-ai/agentd/agentd"
	"github.com/devdepot-ai/agentd/internal/config"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
	"github.com/devdepot-ai/agentd/transport"
)

// TestRevokeStopsTheOrgsCommands: a real hub and a real paired agentd with
// a local socket. Two long commands start through the hub (one ignores
// TERM), one on the local socket. After the machine is revoked, the hub's
// are gone — the first by TERM, the second by KILL after its grace — each
// recorded in the owner's audit log, and the local one still runs.
func TestRevokeStopsTheOrgsCommands(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	dir := t.TempDir()
	cfg, ws := filepath.Join(dir, "config"), filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := agentd.Pair(t.Context(), agentd.PairOptions{Hub: h.url, Code: h.pairCode(h.owner), ConfigDir: cfg, Name: "box"})
	if err != nil {
		t.Fatal(err)
	}
	sockDir, err := os.MkdirTemp("", "rv") // short: a socket path has a length limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "agentd.sock")
	runCtx, stopRun := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- agentd.Run(runCtx, agentd.RunOptions{
			Server:    agentd.Options{Workspace: ws, StateDir: filepath.Join(dir, "state"), Env: os.Environ(), Logger: zaptest.NewLogger(t).Named("agentd")},
			ConfigDir: cfg, Socket: "unix://" + sock,
			// No quick reconnect: the revoke must be learned at once all the same.
			Backoff: transport.Backoff{Initial: time.Hour, Max: time.Hour, Rejected: time.Hour},
		})
	}()
	t.Cleanup(func() { stopRun(); <-done })
	h.waitStatus(h.owner, m.MachineID, hubv1.MachineStatus_MACHINE_STATUS_ONLINE)

	local, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	hubCtx := authCtx(t.Context(), h.owner, m.MachineID)
	viaHub := agentdv1.NewProcessServiceClient(h.conn())
	direct := agentdv1.NewProcessServiceClient(local)

	term := start(t, hubCtx, viaHub, &agentdv1.StartRequest{Argv: []string{"sleep", "600"}})
	kill := start(t, hubCtx, viaHub, &agentdv1.StartRequest{Command: "trap '' TERM; sleep 600", KillGrace: durationpb.New(300 * time.Millisecond)})
	own := start(t, t.Context(), direct, &agentdv1.StartRequest{Argv: []string{"sleep", "600"}})

	if _, err := hubv1.NewAdminServiceClient(h.conn()).RevokeMachine(authCtx(t.Context(), h.owner, ""), &hubv1.RevokeMachineRequest{Id: m.MachineID}); err != nil {
		t.Fatal(err)
	}

	// Wait on the local socket: the daemon's own word on how each ended.
	waitCtx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for id, want := range map[string]string{term: "TERM", kill: "KILL"} {
		w, err := direct.Wait(waitCtx, &agentdv1.WaitRequest{Id: id})
		if err != nil {
			t.Fatalf("wait for %s: %v", id, err)
		}
		if got := w.GetProcess().GetExited().GetSignal(); got != want {
			t.Errorf("%s (started through the hub) ended by %q, want %q: %v", id, got, want, w.GetProcess())
		}
	}
	list, err := direct.List(t.Context(), &agentdv1.ProcessServiceListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	running := map[string]bool{}
	for _, p := range list.GetProcesses() {
		running[p.GetId()] = p.GetExited() == nil
	}
	if diff := cmp.Diff(running, map[string]bool{term: false, kill: false, own: true}); diff != "" {
		t.Errorf("running after the revoke (-got +want):\n%s", diff)
	}

	// The owner's audit log says what was stopped and why; nothing about
	// the local command.
	got := map[string][]string{}
	for _, r := range auditLog(t, local) {
		if r.GetKind() == "process.signal" || r.GetKind() == "process.exit" {
			got[r.GetObjectId()] = append(got[r.GetObjectId()], r.GetKind()+" "+r.GetError())
			if r.GetKind() == "process.signal" && !strings.Contains(r.GetSummary(), "removed from org acme") {
				t.Errorf("signal record %q does not say the machine was removed from its org", r.GetSummary())
			}
		}
	}
	want := map[string][]string{
		term: {"process.signal ", "process.exit killed by SIGTERM"},
		kill: {"process.signal ", "process.exit killed by SIGKILL"},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("audit log's signal and exit records by process (-got +want):\n%s", diff)
	}
}

// start starts a command and returns its id once it runs; the call ends,
// the command does not.
func start(t *testing.T, ctx context.Context, c agentdv1.ProcessServiceClient, req *agentdv1.StartRequest) string {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := c.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := st.Recv()
	if err != nil || ev.GetEvent().GetStarted() == nil {
		t.Fatalf("start %v: %v, %v; want a started event", req, ev, err)
	}
	return ev.GetEvent().GetStarted().GetId()
}

// auditLog returns every record the daemon retains, read on its local socket.
func auditLog(t *testing.T, cc *grpc.ClientConn) []*agentdv1.ActivityRecord {
	t.Helper()
	st, err := agentdv1.NewActivityServiceClient(cc).Watch(t.Context(), &agentdv1.WatchRequest{NoFollow: true})
	if err != nil {
		t.Fatal(err)
	}
	var recs []*agentdv1.ActivityRecord
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return recs
		}
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r.GetRecord())
	}
}

// TestUnpairStopsTheOrgsCommands: `agentd unpair` while the daemon runs
// (its pairing and key removed from the config dir) makes the running
// daemon stop the command the hub started, with a record saying why, and
// end cleanly within moments; it does not wait for an admin's revoke.
func TestUnpairStopsTheOrgsCommands(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	dir := t.TempDir()
	cfg, ws, state := filepath.Join(dir, "config"), filepath.Join(dir, "ws"), filepath.Join(dir, "state")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := agentd.Pair(t.Context(), agentd.PairOptions{Hub: h.url, Code: h.pairCode(h.owner), ConfigDir: cfg, Name: "box"})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(context.Background())
	var runErr error
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		runErr = agentd.Run(runCtx, agentd.RunOptions{
			Server:    agentd.Options{Workspace: ws, StateDir: state, Env: os.Environ(), Logger: zaptest.NewLogger(t).Named("agentd")},
			ConfigDir: cfg, Socket: "-", PairingCheck: 50 * time.Millisecond,
			Backoff: transport.Backoff{Initial: time.Hour, Max: time.Hour, Rejected: time.Hour},
		})
	}()
	t.Cleanup(func() { stopRun(); <-finished })
	h.waitStatus(h.owner, m.MachineID, hubv1.MachineStatus_MACHINE_STATUS_ONLINE)
	id := start(t, authCtx(t.Context(), h.owner, m.MachineID), agentdv1.NewProcessServiceClient(h.conn()),
		&agentdv1.StartRequest{Argv: []string{"sleep", "600"}})

	if err := config.RemoveMachine(cfg); err != nil { // what `agentd unpair` does
		t.Fatal(err)
	}
	select {
	case <-finished:
		if runErr != nil {
			t.Fatalf("agentd run after unpair: %v, want a clean end", runErr)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("agentd run still runs 20 s after its pairing was removed")
	}
	// The audit log on disk names the stop and its reason.
	var log strings.Builder
	_ = filepath.WalkDir(state, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, rerr := os.ReadFile(p); rerr == nil {
				log.Write(b)
			}
		}
		return nil
	})
	if want := "sent TERM to " + id + ", started through the hub: this machine was unpaired"; !strings.Contains(log.String(), want) {
		t.Errorf("the audit log does not say %q", want)
	}
}
