package hub_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/devdepot-ai/agentd/internal/hub"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// idleDriver is a sandbox driver with no sandboxes: enough for a hub to
// serve the sandboxes' socket.
type idleDriver struct{ sandbox.Driver }

func (idleDriver) List(context.Context, map[string]string) ([]sandbox.Info, error) { return nil, nil }
func (idleDriver) Runtimes(context.Context) (map[string][]string, error) {
	return map[string][]string{"runc": nil}, nil
}
func (idleDriver) Volumes(context.Context, map[string]string) ([]sandbox.Volume, error) {
	return nil, nil
}

// floodScript opens N connections to the hub's socket, prints how many
// the hub still holds after 2 s (those refused are closed at once), and
// keeps them until its stdin closes.
const floodScript = `
import socket, sys
conns = []
for i in range(int(sys.argv[1])):
    s = socket.socket(socket.AF_UNIX)
    s.connect("/s/hub.sock")
    conns.append(s)
held = 0
for s in conns:
    s.settimeout(2.0 if held == 0 else 0.05)
    try:
        if s.recv(1) == b"":
            continue
    except socket.timeout:
        held += 1
    except OSError:
        continue
print(held, flush=True)
sys.stdin.read()
`

// askScript sends one HTTP request on the hub's socket and prints the
// status line of the answer.
const askScript = `
import socket
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect("/s/hub.sock")
s.sendall(b"GET /nothing HTTP/1.1\r\nHost: hub\r\nConnection: close\r\n\r\n")
print(s.makefile("rb").readline().decode().strip(), flush=True)
`

// sandboxPython runs python3 code in a container of the sandbox image
// (uid 1000, no network, the hub's socket directory at /s, as a sandbox
// has it), with stdin from the returned writer. The container is labelled
// and removed by its id.
func sandboxPython(t *testing.T, sockDir, code string, args ...string) (*bufio.Reader, io.WriteCloser) {
	t.Helper()
	cid := filepath.Join(t.TempDir(), "cid")
	argv := append([]string{"run", "--rm", "-i", "--cidfile", cid, "--label", "agentd-test=hubup-sbsocket",
		"--network", "none", "--user", "1000", "-v", sockDir + ":/s", "--entrypoint", "python3",
		sandboxImage, "-c", code}, args...)
	cmd := exec.Command("docker", argv...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			if id, err := os.ReadFile(cid); err == nil && len(id) > 0 {
				_ = exec.Command("docker", "rm", "-f", strings.TrimSpace(string(id))).Run()
			}
			<-done
		}
	})
	return bufio.NewReader(stdout), stdin
}

const sandboxImage = "ghcr.io/devdepot-ai/sandbox-base:1"

// One sandbox that opens many connections to the hub's socket gets its
// cap, the rest closed at once; another sandbox, and the host, are still
// served meanwhile. Sandboxes are told apart by the cgroup of the
// process that connected (SO_PEERCRED): all sandboxes share the socket.
func TestSandboxSocketCapPerSandbox(t *testing.T) {
	t.Parallel()
	if err := exec.Command("docker", "image", "inspect", sandboxImage).Run(); err != nil {
		t.Skipf("no %s (make sandbox-base): %v", sandboxImage, err)
	}
	const perSandbox = 16
	sockDir := t.TempDir()
	st := openStore(t)
	t.Cleanup(func() { st.Close() })
	srv, err := hub.New(t.Context(), hub.Options{Store: st, Logger: zaptest.NewLogger(t), MaxConnsPerSandbox: perSandbox,
		Sandboxes: sandboxes.Options{Driver: idleDriver{}, AgentdDir: t.TempDir(), SocketDir: sockDir}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)

	out, hold := sandboxPython(t, sockDir, floodScript, "200")
	line, err := out.ReadString('\n')
	if err != nil {
		t.Fatalf("flooding sandbox: %v", err)
	}
	if got := strings.TrimSpace(line); got != "16" {
		t.Errorf("the hub holds %s of one sandbox's 200 connections, want its cap %d", got, perSandbox)
	}

	// While the flood holds its connections: another sandbox is served…
	ask, _ := sandboxPython(t, sockDir, askScript)
	if status, err := ask.ReadString('\n'); err != nil || !strings.HasPrefix(status, "HTTP/1.1 404") {
		t.Errorf("another sandbox during the flood: %q (%v), want HTTP/1.1 404", status, err)
	}
	// …and so is the host.
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(sockDir, "hub.sock"))
	}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("http://hub/nothing")
	if err != nil {
		t.Fatalf("the host during the flood: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("the host during the flood: %s, want 404", resp.Status)
	}
	hold.Close()
}

// helperSockDirEnv, set, makes TestSandboxSocketHelperProcess serve a hub
// with the sandboxes' socket in that directory (the test binary run again
// as a child, under a low file descriptor limit).
const helperSockDirEnv = "AGENTD_TEST_HUB_SOCKDIR"

// TestSandboxSocketHelperProcess is not a test: run by
// TestSandboxSocketFloodLowLimit as a child process, it serves the
// sandboxes' socket (at most 100 connections per sandbox), says "ready",
// and stops when its stdin closes.
func TestSandboxSocketHelperProcess(t *testing.T) {
	dir := os.Getenv(helperSockDirEnv)
	if dir == "" {
		t.Skip("a helper for TestSandboxSocketFloodLowLimit")
	}
	st := openStore(t)
	defer st.Close()
	srv, err := hub.New(t.Context(), hub.Options{Store: st, MaxConnsPerSandbox: 100,
		Sandboxes: sandboxes.Options{Driver: idleDriver{}, AgentdDir: t.TempDir(), SocketDir: dir}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// Sandboxes that together open more connections to the hub's socket than
// the hub has file descriptors (each under its own cap): the hub holds
// connections up to its limit less a reserve for its own work, stays up,
// and serves the socket again once they are gone. (The socket's accept
// loop, net/http's, already backed off when out of descriptors; before,
// the flood took all of them.)
func TestSandboxSocketFloodLowLimit(t *testing.T) {
	t.Parallel()
	if err := exec.Command("docker", "image", "inspect", sandboxImage).Run(); err != nil {
		t.Skipf("no %s (make sandbox-base): %v", sandboxImage, err)
	}
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("prlimit (util-linux) is not installed")
	}
	const nofile, sandboxes, each = 256, 4, 100
	sockDir := t.TempDir()
	helper := exec.Command("prlimit", "--nofile=256:256", "--", os.Args[0], "-test.run=^TestSandboxSocketHelperProcess$")
	helper.Env = append(os.Environ(), helperSockDirEnv+"="+sockDir)
	stdin, err := helper.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- helper.Wait() }()
	defer func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			t.Error("the hub did not stop within 10 s of its stdin closing")
			_ = helper.Process.Kill()
			<-exited
		}
	}()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("hub helper: %q (%v)", line, err)
	}

	outs := make([]*bufio.Reader, sandboxes)
	holds := make([]io.WriteCloser, sandboxes)
	for i := range sandboxes {
		outs[i], holds[i] = sandboxPython(t, sockDir, floodScript, strconv.Itoa(each))
	}
	total := 0
	for i, out := range outs {
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("sandbox %d: %v", i, err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil {
			t.Fatalf("sandbox %d: %q", i, line)
		}
		total += n
	}
	t.Logf("the hub holds %d of %d sandboxes' %d connections with %d file descriptors", total, sandboxes, sandboxes*each, nofile)
	// The hub keeps a reserve of descriptors for its own work (its
	// database, the Docker engine, egress dials): 64 at this limit.
	if total > nofile-64 || total == 0 {
		t.Errorf("the hub holds %d connections with %d file descriptors, want some, and 64 left for its own work", total, nofile)
	}
	select {
	case err := <-exited:
		exited <- err
		t.Fatalf("the hub exited during the flood: %v", err)
	default:
	}
	for _, h := range holds {
		h.Close()
	}
	// Once they are gone the socket serves again.
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(sockDir, "hub.sock"))
	}}
	defer tr.CloseIdleConnections()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("http://hub/nothing")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusNotFound {
				return
			}
			err = errors.New(resp.Status)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the socket after the flood: %v for 30 s", err)
		}
		time.Sleep(100 * time.Millisecond) // poll interval
	}
}
