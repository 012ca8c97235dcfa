package hub_test

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// agenthub serve --metrics-listen serves /metrics without a token on a
// loopback address, for a local Prometheus; the main port still wants
// the owner's token.
func TestMetricsListen(t *testing.T) {
	t.Parallel()
	p := startHubProc(t, 0, "--metrics-listen", "127.0.0.1:0")
	if !strings.HasPrefix(p.metricsURL, "http://127.0.0.1:") {
		t.Fatalf("no 'serving metrics' line with a loopback URL: %q", p.metricsURL)
	}
	resp, err := http.Get(p.metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s without a token: %s, want 200", p.metricsURL, resp.Status)
	}
	if code, _ := getMetrics(t, p.url, ""); code != http.StatusUnauthorized {
		t.Errorf("GET /metrics on the main port without a token: %d, want 401", code)
	}
}

// --metrics-listen on an address other machines reach is refused before
// the hub starts.
func TestMetricsListenRefusesNonLoopback(t *testing.T) {
	t.Parallel()
	bin := agenthubBin(t)
	db := filepath.Join(t.TempDir(), "hub.db")
	if out, err := exec.CommandContext(t.Context(), bin, "init", "--db", db).CombinedOutput(); err != nil {
		t.Fatalf("agenthub init: %v\n%s", err, out)
	}
	for _, addr := range []string{":0", "0.0.0.0:0", "[::]:0", "hub.example.com:9464", "9464"} {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // a hub that starts would serve on
		out, err := exec.CommandContext(ctx, bin, "serve", "--listen", "127.0.0.1:0", "--db", db, "--sandboxes", "off",
			"--metrics-listen", addr).CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), "loopback only") {
			t.Errorf("serve --metrics-listen %s: %v\n%s\nwant a refusal naming loopback", addr, err, out)
		}
	}
}
