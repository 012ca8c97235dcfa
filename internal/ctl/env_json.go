package ctl

import (
	"encoding/json"
	"time"

	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// envDoc is an environment as `--json` prints it: states, kinds and check
// outcomes as the words people and scripts use (ready, image, pass), not
// the proto's enum names.
type envDoc struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`  // builtin, image, machine
	State   string `json:"state"` // validating, ready, rejected
	Default bool   `json:"default"`
	Image   string `json:"image"`
	Pinned  string `json:"pinned"`
	Reason  string `json:"reason"`
	Network string `json:"network"`
	// Isolation is runc or gvisor ("" for a machine).
	Isolation string `json:"isolation"`
	// Allow is the allow list of its new sandboxes (absent: none).
	Allow []string `json:"allow,omitempty"`
	// WorkspaceMaxBytes bounds /workspace (0: unbounded); WorkspaceBound
	// says what bounds it ("ext4 on loop").
	WorkspaceMaxBytes int64  `json:"workspace_max_bytes"`
	WorkspaceBound    string `json:"workspace_bound"`
	// The lifecycle policy of its sandboxes: a duration or "never" each
	// (empty: not a sandbox environment).
	PauseAfter   string `json:"pause_after,omitempty"`
	StopAfter    string `json:"stop_after,omitempty"`
	ArchiveAfter string `json:"archive_after,omitempty"`
	DeleteAfter  string `json:"delete_after,omitempty"`
	// AllowPrivate are the private destinations its sandboxes may reach
	// besides the hub's.
	AllowPrivate []string   `json:"allow_private,omitempty"`
	Report       []checkDoc `json:"report"`
	Inventory    invDoc     `json:"inventory"`
	Created      *time.Time `json:"created,omitempty"`
	Updated      *time.Time `json:"updated,omitempty"`
}

type checkDoc struct {
	ID     string `json:"id"`
	Status string `json:"status"` // pass, warn, fail
	Title  string `json:"title"`
	Breaks string `json:"breaks"`
	Fix    string `json:"fix"`
}

type invDoc struct {
	Tools          []string `json:"tools"`
	PythonPackages []string `json:"python_packages"`
}

func envDocOf(e *hubv1.Environment) envDoc {
	d := envDoc{Name: e.GetName(), Kind: envKind(e.GetKind()), State: envState(e.GetState()), Default: e.GetDefault(),
		Image: e.GetImage(), Pinned: e.GetPinned(), Reason: e.GetReason(), Network: e.GetNetwork(), Isolation: e.GetIsolation(), Allow: e.GetAllow(), AllowPrivate: e.GetAllowPrivate(),
		WorkspaceMaxBytes: e.GetWorkspaceMaxBytes(), WorkspaceBound: e.GetWorkspaceBound(),
		PauseAfter: e.GetPauseAfter(), StopAfter: e.GetStopAfter(), ArchiveAfter: e.GetArchiveAfter(), DeleteAfter: e.GetDeleteAfter(),
		Report:    []checkDoc{},
		Inventory: invDoc{Tools: e.GetInventory().GetTools(), PythonPackages: e.GetInventory().GetPythonPackages()}}
	if d.Inventory.Tools == nil {
		d.Inventory.Tools = []string{}
	}
	if d.Inventory.PythonPackages == nil {
		d.Inventory.PythonPackages = []string{}
	}
	for _, c := range e.GetReport() {
		d.Report = append(d.Report, checkDoc{ID: c.GetId(), Status: enumWord(c.GetStatus().String(), "CHECK_STATUS_"),
			Title: c.GetTitle(), Breaks: c.GetBreaks(), Fix: c.GetFix()})
	}
	if t := e.GetCreated(); t != nil {
		v := t.AsTime()
		d.Created = &v
	}
	if t := e.GetUpdated(); t != nil {
		v := t.AsTime()
		d.Updated = &v
	}
	return d
}

// printEnv writes one environment as a line of JSON.
func (a *app) printEnv(e *hubv1.Environment) error { return a.printDoc(envDocOf(e)) }

// printDoc writes v as one line of JSON.
func (a *app) printDoc(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = a.io.Out.Write(append(b, '\n'))
	return err
}
