package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// dockerOrSkip skips a test that needs a Docker engine when none answers.
func dockerOrSkip(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("no docker on PATH")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Skipf("no Docker engine answers: %v: %s", err, out)
	}
}

// serveArgs are agenthub serve's arguments for a hub on a free loopback
// port with the SQLite file db, no started-ahead sandboxes and no npm
// lookups, then extra.
func serveArgs(db string, extra ...string) []string {
	return append([]string{"serve", "--listen", "127.0.0.1:0", "--db", db, "--warm-builtin", "0", "--agent-releases", "off"}, extra...)
}

// startServe starts agenthub serve ARGS and returns once it logs that it
// serves, with the log read so far; the process is stopped (SIGINT, then
// waited for) when the test ends.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(toolsDir, "agenthub"), args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	sc := bufio.NewScanner(stderr)
	serving := false
	for !serving && sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		serving = strings.Contains(sc.Text(), `"msg":"serving"`)
	}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		io.Copy(io.Discard, stderr) //nolint:errcheck // the rest of the log, until it exits
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt) //nolint:errcheck // it may have exited
		<-drained
		cmd.Wait() //nolint:errcheck // stopped by the test
	})
	if !serving {
		t.Fatalf("agenthub %s ended before serving:\n%s", strings.Join(args, " "), log.String())
	}
	return log.String()
}

// runServe runs agenthub serve ARGS, which must fail, and returns its
// stderr.
func runServe(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(toolsDir, "agenthub"), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Fatalf("agenthub %s exited 0, want a failure:\n%s", strings.Join(args, " "), stderr.String())
	}
	return stderr.String()
}

// TestServeSecondHubSameSandboxDir: a second agenthub serve on the same
// --db, and so the same default --sandbox-dir, is refused with an error
// that says another agenthub serves there and names both ways out; it
// does not touch the first hub's staged agentd. The way out it names
// (--sandboxes off) then starts.
func TestServeSecondHubSameSandboxDir(t *testing.T) {
	dockerOrSkip(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "hub.db")
	agentd := filepath.Join(toolsDir, "agentd")
	log := startServe(t, serveArgs(db, "--agentd", agentd, "--sandboxes", "on")...)
	if !strings.Contains(log, `"msg":"sandboxes on"`) {
		t.Fatalf("the first hub runs no sandboxes:\n%s", log)
	}
	staged := filepath.Join(dir, "sandboxes", "agentd", "agentd")
	before := inode(t, staged)

	got := runServe(t, serveArgs(db, "--agentd", agentd)...)
	for _, want := range []string{"another agenthub", filepath.Join(dir, "sandboxes"), "--sandbox-dir", "--sandboxes off"} {
		if !strings.Contains(got, want) {
			t.Errorf("the second agenthub's stderr lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "another agentd") {
		t.Errorf("the second agenthub's stderr calls the first an agentd:\n%s", got)
	}
	if after := inode(t, staged); after != before {
		t.Errorf("the second agenthub replaced the first's staged agentd %s (inode %d, was %d)", staged, after, before)
	}

	log = startServe(t, serveArgs(db, "--agentd", agentd, "--sandboxes", "off")...)
	if !strings.Contains(log, "sandboxes are off") {
		t.Errorf("the hub started with --sandboxes off does not say so:\n%s", log)
	}
}

// TestServeDynamicAgentd: with an engine that answers, a dynamically
// linked --agentd is refused, and the error says how to start without
// sandboxes, which then starts.
func TestServeDynamicAgentd(t *testing.T) {
	dockerOrSkip(t)
	dynamic := "/bin/true" // dynamically linked on Debian, Ubuntu, Fedora
	if err := checkStatic(dynamic); err == nil || !strings.Contains(err.Error(), "dynamically") {
		t.Skipf("%s is not a dynamically linked amd64 ELF here (%v)", dynamic, err)
	}
	got := runServe(t, serveArgs(filepath.Join(t.TempDir(), "hub.db"), "--agentd", dynamic)...)
	for _, want := range []string{dynamic, "linked dynamically", "CGO_ENABLED=0", "--sandboxes off"} {
		if !strings.Contains(got, want) {
			t.Errorf("agenthub serve --agentd %s: stderr lacks %q:\n%s", dynamic, want, got)
		}
	}
	// What it advises works: the same hub starts without sandboxes.
	log := startServe(t, serveArgs(filepath.Join(t.TempDir(), "hub.db"), "--agentd", dynamic, "--sandboxes", "off")...)
	if !strings.Contains(log, "sandboxes are off") {
		t.Errorf("the hub started with --sandboxes off does not say so:\n%s", log)
	}
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}
