package console

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// listBackend is a Backend whose machines answer ProcessService.List as
// set: the rest of Backend is not used by the machines table.
type listBackend struct {
	Backend
	machines []*hubv1.Machine
	answer   func(ctx context.Context, id string) ([]*agentdv1.ProcessInfo, error)

	mu    sync.Mutex
	asked []string
}

type listAdmin struct {
	hubv1.UnimplementedAdminServiceServer
	b *listBackend
}

func (a listAdmin) ListMachines(context.Context, *hubv1.ListMachinesRequest) (*hubv1.ListMachinesResponse, error) {
	return &hubv1.ListMachinesResponse{Machines: a.b.machines}, nil
}

func (b *listBackend) Admin() hubv1.AdminServiceServer   { return listAdmin{b: b} }
func (b *listBackend) OnlineSince() map[string]time.Time { return nil }

func (b *listBackend) Processes(ctx context.Context, id string) ([]*agentdv1.ProcessInfo, error) {
	b.mu.Lock()
	b.asked = append(b.asked, id)
	b.mu.Unlock()
	return b.answer(ctx, id)
}

// TestRunningCount: the count is what each online machine says it runs
// (running processes only); a machine that hangs or fails shows "no
// answer" once the deadline passes, and offline machines are not asked.
func TestRunningCount(t *testing.T) {
	t.Parallel()
	const online, offline = hubv1.MachineStatus_MACHINE_STATUS_ONLINE, hubv1.MachineStatus_MACHINE_STATUS_OFFLINE
	const running, exited = agentdv1.ProcessState_PROCESS_STATE_RUNNING, agentdv1.ProcessState_PROCESS_STATE_EXITED
	b := &listBackend{
		machines: []*hubv1.Machine{
			{Id: "busy", Status: online}, {Id: "idle", Status: online}, {Id: "hangs", Status: online},
			{Id: "fails", Status: online}, {Id: "away", Status: offline},
		},
		answer: func(ctx context.Context, id string) ([]*agentdv1.ProcessInfo, error) {
			switch id {
			case "busy":
				return []*agentdv1.ProcessInfo{{State: running}, {State: exited}, {State: running}}, nil
			case "idle":
				return []*agentdv1.ProcessInfo{{State: exited}}, nil
			case "hangs":
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return nil, errors.New("machine fails is offline")
		},
	}
	const timeout = 300 * time.Millisecond
	c, err := New(Options{Backend: b, Sessions: struct{ Sessions }{}, ListTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	tab, err := c.machineTable(&session{ctx: t.Context()})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*timeout {
		t.Errorf("the table took %v with a machine that does not answer (deadline %v)", took, timeout)
	}
	if diff := cmp.Diff(tab.Running, map[string]int{"busy": 2, "idle": 0}); diff != "" {
		t.Errorf("running (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(tab.NoAnswer, map[string]bool{"hangs": true, "fails": true}); diff != "" {
		t.Errorf("no answer (-got +want):\n%s", diff)
	}
	for _, id := range b.asked {
		if id == "away" {
			t.Error("an offline machine was asked")
		}
	}
	html, err := c.fragment("machines", "machine-table", tab)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<span class="warn">no answer</span>`, "<td>2</td>", "<td>0</td>", `<span class="sr">not known: offline</span>`} {
		if !contains(html, want) {
			t.Errorf("table lacks %q:\n%s", want, html)
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
