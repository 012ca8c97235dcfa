package hub_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// agentctl top against the real engine: a builtin sandbox holding 100 MiB
// in a detached python3 shows it in its memory, with its limit and a pids
// count and limit, a busy loop in its CPU; members read it; bad flags are
// usage errors.
func TestSandboxTop(t *testing.T) {
	h := startSandboxHub(t, nil)
	run := h.agentctl()
	for _, args := range [][]string{
		{"top", "--interval", "10ms"},
		{"top", "--interval", "soon"},
		{"top", "extra"},
		{"top", "--bogus"},
	} {
		if code, _, errs := run(args...); code != 2 || errs == "" {
			t.Errorf("agentctl %s = %d %q, want 2 and a message", strings.Join(args, " "), code, errs)
		}
	}
	if code, out, errs := run("top", "--once", "--json"); code != 0 || strings.Contains(out, `"c-top"`) || !strings.Contains(out, `"sandboxes":[`) {
		t.Errorf("top --once --json before the conversation = %d %q %q, want a list without it", code, out, errs)
	}
	if code, out, errs := run("--env", "builtin", "--conversation", "c-top", "exec", "--detach", "--",
		"python3", "-c", "x=bytearray(100<<20); import time; time.sleep(30)"); code != 0 {
		t.Fatalf("exec --detach python3 = %d %q %q", code, out, errs)
	}
	type usage struct {
		ID           string  `json:"id"`
		Conversation string  `json:"conversation"`
		State        string  `json:"state"`
		CPU          float64 `json:"cpu_percent"`
		Mem          int64   `json:"memory_bytes,string"`
		MemLimit     int64   `json:"memory_limit,string"`
		Pids         int64   `json:"pids,string"`
		PidsLimit    int64   `json:"pids_limit,string"`
	}
	// top polls agentctl top --once --json until c-top's sample satisfies ok.
	top := func(what string, ok func(usage) bool) usage {
		t.Helper()
		var last string
		for range 50 {
			code, out, errs := run("top", "--once", "--json")
			if code != 0 {
				t.Fatalf("top --once --json = %d %q %q", code, out, errs)
			}
			last = out
			var doc struct{ Sandboxes []usage }
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatalf("top --once --json: %v in %q", err, out)
			}
			var u usage
			for _, s := range doc.Sandboxes {
				if s.Conversation == "c-top" {
					u = s
				}
			}
			if u.State != "running" || u.MemLimit != 512<<20 || u.PidsLimit != h.opts.Limits.Pids || u.Pids < 2 {
				t.Fatalf("top --once --json: %+v, want c-top running, limits 512 MiB and %d pids, at least 2 pids", u, h.opts.Limits.Pids)
			}
			if ok(u) {
				return u
			}
			select {
			case <-time.After(200 * time.Millisecond):
			case <-t.Context().Done():
				t.Fatal(t.Context().Err())
			}
		}
		t.Fatalf("top --once --json never showed %s; last: %s", what, last)
		return usage{}
	}
	// The detached process is started when exec returns; its bytearray
	// is filled a moment later.
	u := top("100 MiB in use", func(u usage) bool { return u.Mem >= 100<<20 })
	code, out, errs := run("top", "--once")
	t.Logf("agentctl top --once:\n%s", out)
	if code != 0 || !strings.Contains(out, u.ID) || !strings.Contains(out, "512.0 MiB") || !strings.Contains(out, fmt.Sprintf("/ %d", h.opts.Limits.Pids)) {
		t.Errorf("top --once = %d %q %q, want the sandbox's row with its limits", code, out, errs)
	}
	// Members read it too.
	if code, out, errs := h.memberctl()("top", "--once"); code != 0 || !strings.Contains(out, u.ID) {
		t.Errorf("top --once as a member = %d %q %q, want the sandbox's row", code, out, errs)
	}
	// A busy loop shows in CPU (the sandbox has one CPU; the machine is
	// shared, so a fifth of it is enough).
	if code, out, errs := run("--env", "builtin", "--conversation", "c-top", "exec", "--detach", "--",
		"python3", "-c", "import time; t=time.time()+20; exec('while time.time()<t: pass')"); code != 0 {
		t.Fatalf("exec --detach a busy loop = %d %q %q", code, out, errs)
	}
	u = top("CPU ≥ 20%", func(u usage) bool { return u.CPU >= 20 })
	t.Logf("busy: %.1f%% CPU", u.CPU)
}
