package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/devdepot-ai/agentd/internal/activity"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/testbin"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// agentdBin is the agentd binary TestMain builds for the tests to run as a
// real OS process.
var agentdBin string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := testbin.Temp("agentd")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	agentdBin = filepath.Join(dir, "agentd")
	return m.Run()
}

// TestRunStopsGracefullyOnSIGTERM runs `agentd run` as a real process
// paired with a real hub, starts a command with a grandchild through the
// hub, and stops agentd with SIGTERM: it exits 0 within the grace period,
// the command's whole process group is gone, the audit log has the
// command's exit, and the hub shows the machine offline at once.
func TestRunStopsGracefullyOnSIGTERM(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		script string
		// offline and exit bound the time from SIGTERM until the hub shows
		// the machine offline and until agentd has exited.
		offline, exit time.Duration
	}{
		{"command stops on TERM", "sleep 300 & sleep 300", 2 * time.Second, 3 * time.Second},
		// SIGKILL follows after the 5 s grace. The tunnel stays up while
		// the command's call drains, but the hub shows the machine offline
		// from the daemon's first shutdown record (agentd.stop) on.
		{"command ignores TERM", "trap '' TERM; sleep 300 & sleep 300", 2 * time.Second, 8 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testRunSIGTERM(t, tc.script, tc.offline, tc.exit)
		})
	}
}

func testRunSIGTERM(t *testing.T, script string, offlineWithin, exitWithin time.Duration) {
	hubAddr, token := startHub(t)
	dir := t.TempDir()
	cfg, state, ws := filepath.Join(dir, "config"), filepath.Join(dir, "state"), filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "HOME="+dir, "SHELL=/bin/sh", "AGENTD_CONFIG_DIR="+cfg, "AGENTD_STATE_DIR="+state)

	cc, err := grpc.NewClient(hubAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	admin := hubv1.NewAdminServiceClient(cc)
	adminCtx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+token)
	code, err := admin.CreatePairingCode(adminCtx, &hubv1.CreatePairingCodeRequest{})
	if err != nil {
		t.Fatal(err)
	}

	pair := exec.Command(agentdBin, "pair", "--hub", "http://"+hubAddr, "--code", code.GetCode())
	pair.Env = env
	var pairErr bytes.Buffer
	pair.Stderr = &pairErr
	out, err := pair.Output()
	if err != nil {
		t.Fatalf("agentd pair: %v\n%s", err, pairErr.String())
	}
	id := strings.TrimSpace(string(out))

	run := exec.Command(agentdBin, "run", "--workspace", ws, "--log-level", "debug")
	run.Env = env
	var logs bytes.Buffer
	run.Stdout, run.Stderr = &logs, &logs
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	reaped := false // exited was received from
	var exitedAt time.Time
	go func() {
		err := run.Wait()
		exitedAt = time.Now()
		exited <- err
	}()
	defer func() {
		if !reaped {
			_ = run.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("agentd run's log:\n%s", logs.String())
		}
	}()
	machineStatus := func() hubv1.MachineStatus {
		resp, err := admin.ListMachines(adminCtx, &hubv1.ListMachinesRequest{})
		if err != nil {
			t.Fatalf("ListMachines: %v", err)
		}
		for _, m := range resp.GetMachines() {
			if m.GetId() == id {
				return m.GetStatus()
			}
		}
		return hubv1.MachineStatus_MACHINE_STATUS_UNSPECIFIED
	}
	waitFor(t, 10*time.Second, "the machine to come online", func() bool {
		return machineStatus() == hubv1.MachineStatus_MACHINE_STATUS_ONLINE
	})

	// A long command with a grandchild, started through the hub; the
	// caller stays attached, as agentctl exec does.
	callCtx := metadata.AppendToOutgoingContext(adminCtx, "agentd-machine", id)
	st, err := agentdv1.NewProcessServiceClient(cc).Start(callCtx, &agentdv1.StartRequest{Argv: []string{"sh", "-c", script}})
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.Recv()
	if err != nil || first.GetEvent().GetStarted() == nil {
		t.Fatalf("first event %v, %v; want started", first, err)
	}
	procID, pgid := first.GetEvent().GetStarted().GetId(), int(first.GetEvent().GetStarted().GetPid())
	waitFor(t, 5*time.Second, "the command's grandchild", func() bool { return len(groupMembers(t, pgid)) >= 2 })
	members := groupMembers(t, pgid)

	// hubHas reports whether the hub stored the command's record of kind.
	hubHas := func(kind string) bool {
		ctx, cancel := context.WithCancel(adminCtx)
		defer cancel()
		w, err := hubv1.NewActivityServiceClient(cc).Watch(ctx, &hubv1.WatchRequest{Tail: 1000, NoFollow: true})
		if err != nil {
			t.Fatal(err)
		}
		for {
			r, err := w.Recv()
			if err != nil {
				return false
			}
			if r.GetMachineId() == id && r.GetRecord().GetKind() == kind && r.GetRecord().GetObjectId() == procID {
				return true
			}
		}
	}
	// The hub's activity watch on the daemon is open (it has the start):
	// records added from now on reach the hub before the tunnel closes.
	// (Those added before a watch opens reach it when the daemon is back.)
	waitFor(t, 10*time.Second, "the hub to store the command's start", func() bool { return hubHas("process.start") })

	sent := time.Now()
	if err := run.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The hub shows the machine offline promptly, far sooner than its
	// 30 s heartbeat.
	for machineStatus() != hubv1.MachineStatus_MACHINE_STATUS_OFFLINE && time.Since(sent) < 15*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	offline := time.Since(sent)
	if offline > offlineWithin {
		t.Errorf("the hub showed the machine offline %s after agentd got SIGTERM, want < %s", offline, offlineWithin)
	}
	select {
	case err := <-exited:
		reaped = true
		if err != nil {
			t.Errorf("agentd run exited with %v after SIGTERM, want exit 0", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("agentd run still running 15s after SIGTERM")
	}
	if d := exitedAt.Sub(sent); d > exitWithin {
		t.Errorf("agentd run exited %s after SIGTERM, want < %s", d, exitWithin)
	}
	t.Logf("after SIGTERM: offline on the hub in %s, agentd exited in %s", offline, exitedAt.Sub(sent))

	// Not on a terminal (as under a service manager), it logs JSON lines.
	for line := range strings.Lines(logs.String()) {
		var entry struct{ Level, Msg string }
		if err := json.Unmarshal([]byte(line), &entry); err != nil || entry.Level == "" || entry.Msg == "" {
			t.Errorf("log line is not a JSON entry with level and msg: %q", line)
			break
		}
	}

	// The caller saw the command end.
	var exit *agentdv1.Exited
	for {
		r, err := st.Recv()
		if err != nil {
			break
		}
		if e := r.GetEvent().GetExited(); e != nil {
			exit = e
		}
	}
	if exit == nil {
		t.Error("the caller got no exited event before the stream ended")
	}

	for _, pid := range members {
		if alive(pid) {
			t.Errorf("process %d of the command's group %d is still alive after agentd stopped", pid, pgid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}

	var rec *activity.Record
	err = activity.Tail(t.Context(), state, false, 0, func(r activity.Record) error {
		if r.Kind == "process.exit" && r.ObjectID == procID {
			rec = &r
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading the audit log: %v", err)
	}
	if rec == nil {
		t.Errorf("the audit log in %s has no process.exit record of %s", state, procID)
	}

	// The daemon sends the exit to the hub's activity watch before it
	// closes the tunnel.
	deadline := time.Now().Add(3 * time.Second)
	for !hubHas("process.exit") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !hubHas("process.exit") {
		t.Errorf("the hub's activity has no process.exit record of %s 3s after the machine went offline", procID)
	}
}

// startHub serves a real hub on a loopback port and returns its address
// and an admin token of its org.
func startHub(t *testing.T) (addr, token string) {
	t.Helper()
	h := hubtest.Start(t, hubtest.Options{})
	return h.Addr, h.Token
}

// groupMembers lists the live (not zombie) processes of process group pgid.
func groupMembers(t *testing.T, pgid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		state, pg, ok := procStat(pid)
		if ok && pg == pgid && state != "Z" {
			pids = append(pids, pid)
		}
	}
	return pids
}

// alive reports whether pid is a live process (not a zombie).
func alive(pid int) bool {
	state, _, ok := procStat(pid)
	return ok && state != "Z"
}

// procStat reads a process's state letter and process group from /proc.
func procStat(pid int) (state string, pgid int, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", 0, false
	}
	// pid (comm) state ppid pgrp …; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return "", 0, false
	}
	pg, err := strconv.Atoi(f[2])
	if err != nil {
		return "", 0, false
	}
	return f[0], pg, true
}

// waitFor polls cond until it holds or d has passed.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
