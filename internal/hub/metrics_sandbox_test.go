package hub_test

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var cpuLine = regexp.MustCompile(`(?m)^agenthub_sandbox_cpu_seconds_total\{org="acme"\} ([0-9.]+)$`)

// /metrics has sandboxes by org, environment and state, and the CPU
// seconds each org's sandboxes used, a counter (the real engine).
func TestMetricsSandboxes(t *testing.T) {
	h := startSandboxHub(t, nil)
	// About a tenth of a second of CPU in the conversation's sandbox.
	if out, code, err := h.run(h.ctx("builtin", "busy"), "sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; echo done"); err != nil || code != 0 {
		t.Fatalf("busy loop: %v %d %s", err, code, out)
	}
	scrape := func() (string, float64) {
		t.Helper()
		code, body := getMetrics(t, h.URL, h.Token)
		if code != http.StatusOK {
			t.Fatalf("/metrics: %d %s", code, body)
		}
		m := cpuLine.FindStringSubmatch(string(body))
		if m == nil {
			t.Fatalf("/metrics has no CPU seconds for org acme:\n%s", body)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return body, v
	}
	body, first := scrape()
	for _, want := range []string{
		"# TYPE agenthub_sandboxes gauge\n",
		`agenthub_sandboxes{org="acme",environment="builtin",state="running"} 1` + "\n",
		"# TYPE agenthub_sandbox_cpu_seconds_total counter\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	if first < 0.05 {
		t.Errorf("CPU seconds of org acme = %v after a busy loop, want at least 0.05", first)
	}
	if _, code, err := h.run(h.ctx("builtin", "busy"), "sh", "-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done"); err != nil || code != 0 {
		t.Fatalf("second loop: %v %d", err, code)
	}
	if _, second := scrape(); second <= first {
		t.Errorf("CPU seconds went from %v to %v after more work, want more", first, second)
	}
}
