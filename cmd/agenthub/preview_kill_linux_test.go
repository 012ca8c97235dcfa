package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tool runs one of the built tools with env added; its stdout, trimmed.
func tool(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), filepath.Join(toolsDir, name), args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// A download through a preview when the hub is killed with SIGKILL: the
// browser's side sees a clean error at once (no hang), the daemon closes
// its connection to the app (nothing left open for a hub that is gone)
// and keeps running.
func TestPreviewDownloadHubKilled(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "hub.db")
	token := tool(t, nil, "agenthub", "init", "--db", db)

	hub := exec.Command(filepath.Join(toolsDir, "agenthub"), serveArgs(db, "--sandboxes", "off", "--preview-listen", "127.0.0.1:0")...)
	stderr, err := hub.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := hub.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hub.Process.Kill(); hub.Wait() }) //nolint:errcheck // killed by the test
	var hubURL string
	sc := bufio.NewScanner(stderr)
	for hubURL == "" && sc.Scan() {
		var line struct{ Msg, URL string }
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "serving" {
			hubURL = line.URL
		}
	}
	if hubURL == "" {
		t.Fatal("agenthub serve never said it serves")
	}
	go io.Copy(io.Discard, stderr) //nolint:errcheck // the rest of the log

	env := []string{"AGENTD_TOKEN=" + token, "AGENTD_CONFIG_DIR=" + filepath.Join(dir, "cfg"), "AGENTD_STATE_DIR=" + filepath.Join(dir, "state")}
	code := strings.Fields(tool(t, env, "agentctl", "--hub", hubURL, "admin", "pair-code", "create"))[0]
	machine := tool(t, env, "agentd", "pair", "--hub", hubURL, "--code", code, "--name", "kill9")
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	daemon := exec.Command(filepath.Join(toolsDir, "agentd"), "run", "--workspace", ws, "--socket", "-")
	daemon.Env = append(os.Environ(), env...)
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { daemon.Process.Signal(os.Interrupt); daemon.Wait() }) //nolint:errcheck // stopped by the test

	// The app: an endless download; it says when its handler has ended.
	ended := make(chan error, 1)
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	app := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 64<<10)
		for {
			if _, err := w.Write(buf); err != nil {
				ended <- err
				return
			}
		}
	})}
	go app.Serve(l) //nolint:errcheck // closed below
	t.Cleanup(func() { app.Close() })
	port := strings.TrimPrefix(l.Addr().String(), "127.0.0.1:")

	var url string
	for deadline := time.Now().Add(30 * time.Second); url == ""; {
		cmd := exec.CommandContext(t.Context(), filepath.Join(toolsDir, "agentctl"), "--hub", hubURL, "--machine", machine, "port", "expose", port, "--access", "public")
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.Output(); err == nil {
			url = strings.TrimSpace(string(out))
		} else if time.Now().After(deadline) {
			t.Fatalf("port expose: %v", err)
		} else {
			time.Sleep(100 * time.Millisecond) // the daemon's tunnel is still coming up
		}
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var resp *http.Response
	for deadline := time.Now().Add(30 * time.Second); ; {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err = http.DefaultClient.Do(req); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusOK {
			break
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
		}
		time.Sleep(100 * time.Millisecond) // the daemon's tunnel is still coming up (503)
	}
	defer resp.Body.Close()
	if _, err := io.CopyN(io.Discard, resp.Body, 8<<20); err != nil {
		t.Fatalf("the first 8 MiB: %v", err)
	}
	if err := hub.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_, err = io.Copy(io.Discard, resp.Body)
	switch {
	case err == nil:
		t.Error("the download ended as if complete after the hub was killed")
	case ctx.Err() != nil:
		t.Fatal("the download hung after the hub was killed")
	}
	t.Logf("client: %v, %s after the kill", err, time.Since(killed).Round(time.Millisecond))

	select {
	case err := <-ended:
		t.Logf("the app's connection ended: %v, %s after the kill", err, time.Since(killed).Round(time.Millisecond))
	case <-time.After(45 * time.Second):
		t.Fatal("the daemon kept its connection to the app open after the hub died")
	}
	if err := daemon.Process.Signal(syscall.Signal(0)); err != nil || errors.Is(err, os.ErrProcessDone) {
		t.Errorf("agentd is gone after the hub was killed: %v", err)
	}
}
