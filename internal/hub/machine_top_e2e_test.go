package hub_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// agentctl top's machine rows: a paired machine running a busy loop
// (detached, through the hub) shows the command, its CPU, memory and
// processes, and the host's load and CPUs; on a hub that runs no
// sandboxes, so top works without them.
func TestMachineTop(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	m := h.startMachine(h.owner)
	if code, out, errs := h.agentctl(h.owner, m.id, "exec", "--detach", "--timeout", "30s", "--", "sh", "-c", "while :; do :; done"); code != 0 {
		t.Fatalf("exec --detach a busy loop = %d %q %q", code, out, errs)
	}
	type usage struct {
		ID        string  `json:"id"`
		Name      string  `json:"name"`
		Error     string  `json:"error"`
		CPU       float64 `json:"cpu_percent"`
		Mem       int64   `json:"memory_bytes,string"`
		Procs     int64   `json:"processes,string"`
		Commands  int32   `json:"commands"`
		Load1     float64 `json:"load1"`
		CPUs      int32   `json:"cpus"`
		HostTotal int64   `json:"memory_total_bytes,string"`
	}
	var last string
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, out, errs := h.agentctl(h.owner, "", "top", "--once", "--json")
		if code != 0 {
			t.Fatalf("top --once --json = %d %q %q", code, out, errs)
		}
		last = out
		var doc struct{ Machines []usage }
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("%v in %q", err, out)
		}
		if len(doc.Machines) == 1 {
			u := doc.Machines[0]
			if u.ID != m.id || u.Name != "box" || u.Error != "" || u.CPUs < 1 || u.HostTotal <= 0 {
				t.Fatalf("machine row %+v: want %s named box, its CPUs and memory", u, m.id)
			}
			if u.Commands == 1 && u.Procs >= 1 && u.Mem > 0 && u.CPU >= 5 {
				t.Logf("busy machine: %+v", u)
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("top never showed the machine's busy command (1 command, CPU ≥ 5%%); last: %s", last)
		}
	}
	code, out, errs := h.agentctl(h.owner, "", "top", "--once")
	if code != 0 || !strings.Contains(out, "MACHINE") || !strings.Contains(out, m.id) || !strings.Contains(out, "box") {
		t.Errorf("top --once = %d %q %q, want the machine's row", code, out, errs)
	}
}
