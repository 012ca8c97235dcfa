package main

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/devdepot-ai/agentd/internal/activity"
)

// TestLogFollowStopsOnSignal runs `agentd log -f` as a real process on an
// audit log with one record, waits for that record's line, and checks that
// SIGINT and SIGTERM end it promptly with 130 and 143, as a shell reports
// a process a signal ended.
func TestLogFollowStopsOnSignal(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(unix.SignalName(sig), func(t *testing.T) {
			t.Parallel()
			state := t.TempDir()
			l, err := activity.Open(activity.Options{Dir: state})
			if err != nil {
				t.Fatal(err)
			}
			l.Add(activity.Record{Kind: "files.stat", Summary: "stat notes.txt", Outcome: activity.OK})
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}

			cmd := exec.Command(agentdBin, "log", "-f", "--state-dir", state)
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			cmd.Stdout = w
			err = cmd.Start()
			w.Close()
			if err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			reaped := false
			defer func() {
				if !reaped {
					_ = cmd.Process.Kill()
					<-exited
				}
			}()

			line, err := bufio.NewReader(r).ReadString('\n')
			if err != nil || !strings.Contains(line, "stat notes.txt") {
				t.Fatalf("agentd log -f printed %q, %v; want the record's line", line, err)
			}
			sent := time.Now()
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-exited:
				reaped = true
			case <-time.After(10 * time.Second):
				t.Fatalf("agentd log -f still running 10s after %v", sig)
			}
			if code, took := cmd.ProcessState.ExitCode(), time.Since(sent); code != 128+int(sig) || took > 2*time.Second {
				t.Errorf("agentd log -f: exit %d %s after %v, want %d within 2s", code, took, sig, 128+int(sig))
			}
		})
	}
}
