package console

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/units"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// sbAction is one thing a person may ask of a sandbox from the Sandboxes
// page: a state change (ChangeSandboxState) or remove (RemoveSandbox).
type sbAction struct {
	Name    string // the path's action: pause, resume, stop, start, archive, restore, remove
	Label   string // the button's text
	Confirm bool   // destructive: a confirmation page first
	Admin   bool   // only admins may (as the RPCs have it)
}

var sbActions = map[string]sbAction{
	"pause":   {Name: "pause", Label: "Pause", Admin: true},
	"resume":  {Name: "resume", Label: "Resume"},
	"start":   {Name: "start", Label: "Start"},
	"restore": {Name: "restore", Label: "Restore"},
	"stop":    {Name: "stop", Label: "Stop", Confirm: true, Admin: true},
	"archive": {Name: "archive", Label: "Archive", Confirm: true, Admin: true},
	"remove":  {Name: "remove", Label: "Remove", Confirm: true, Admin: true},
}

// sbStateActions are the actions that apply to each state, in the order
// the page shows them. A sandbox starting or failed can only be removed;
// one in the warm pool (no conversation) is the hub's to keep.
var sbStateActions = map[string][]string{
	"running":  {"pause", "stop", "archive", "remove"},
	"paused":   {"resume", "stop", "archive", "remove"},
	"stopped":  {"start", "archive", "remove"},
	"archived": {"restore", "remove"},
}

// actionsFor are the buttons of a sandbox for the signed-in person:
// those that apply to its state and that the person may use.
func actionsFor(sb *hubv1.Sandbox, admin bool) []sbAction {
	names, ok := sbStateActions[sb.GetState()]
	if !ok || sb.GetConversation() == "" {
		names = []string{"remove"}
	}
	var out []sbAction
	for _, n := range names {
		if a := sbActions[n]; admin || !a.Admin {
			out = append(out, a)
		}
	}
	return out
}

// sbRow is one row of the Sandboxes page: agentctl sandbox ls's columns.
type sbRow struct {
	ID, Env, Conversation, State, Reason, Online string
	Created, LastUsed, Next, Size, Image         string
	ShortImage                                   string // Image with its digest cut to 12 hex digits
	Actions                                      []sbAction
}

// shortImage cuts an image's sha256 digest to its first 12 hex digits, as
// docker images shows ids; the page has the whole one as a tooltip.
func shortImage(ref string) string {
	const alg = "sha256:"
	i := strings.Index(ref, alg)
	if i < 0 || len(ref) <= i+len(alg)+12 {
		return ref
	}
	return ref[:i+len(alg)+12] + "…"
}

func sandboxRow(sb *hubv1.Sandbox, now time.Time, admin bool) sbRow {
	r := sbRow{ID: sb.GetId(), Env: sb.GetEnvironment(), Conversation: sb.GetConversation(), State: sb.GetState(), Reason: sb.GetStateReason(),
		Online: "no", Created: ago(now, sb.GetCreated()), LastUsed: ago(now, sb.GetLastUsed()), Next: sb.GetNextStep(), Size: "-", Image: sb.GetImage(),
		Actions: actionsFor(sb, admin)}
	if r.Conversation == "" {
		r.Conversation = "(pool)"
	}
	if sb.GetOnline() {
		r.Online = "yes"
	}
	if sb.GetLastUsed() == nil {
		r.LastUsed = "-"
	}
	if r.Next == "" {
		r.Next = "-"
	}
	if r.Image == "" {
		r.Image = "-"
	}
	r.ShortImage = shortImage(r.Image)
	if sb.GetWorkspaceMeasured() != nil && sb.GetWorkspaceBytes() >= 0 {
		r.Size = units.Bytes(sb.GetWorkspaceBytes())
	}
	return r
}

// sandboxesData is the Sandboxes page's.
type sandboxesData struct {
	Admin bool
	Rows  []sbRow
	Done  string // what the last action did, in words
}

// sandboxes lists the org's sandboxes with agentctl sandbox ls's columns
// and, per row, the buttons the person may use.
func (c *Console) sandboxes(w http.ResponseWriter, r *http.Request, s *session) {
	resp, err := c.opts.Backend.Environments().ListSandboxes(s.ctx, &hubv1.ListSandboxesRequest{})
	if err != nil {
		c.failBack(w, r, s, err, "sandboxes", "Sandboxes")
		return
	}
	d := sandboxesData{Admin: s.who.Admin}
	now := c.opts.Now()
	for _, sb := range resp.GetSandboxes() {
		d.Rows = append(d.Rows, sandboxRow(sb, now, s.who.Admin))
	}
	d.Done = doneText(r.URL.Query().Get("done"), r.URL.Query().Get("id"), d.Rows)
	c.render(w, http.StatusOK, c.view("sandboxes", s, d))
}

// doneText says what an action did, after its redirect: only for an
// action the page has and a sandbox the org lists (removed: one it does
// not), so a crafted link cannot put words on the page.
func doneText(action, id string, rows []sbRow) string {
	past := map[string]string{"pause": "paused", "resume": "resumed", "start": "started", "restore": "restored",
		"stop": "stopped", "archive": "archived", "remove": "removed with its /workspace"}
	p, ok := past[action]
	if !ok || id == "" {
		return ""
	}
	listed := false
	for _, r := range rows {
		if r.ID == id {
			listed = true
		}
	}
	if listed == (action == "remove") {
		return ""
	}
	return "Sandbox " + id + " " + p + "."
}

// sandboxConfirmData is a confirmation page's.
type sandboxConfirmData struct {
	Action sbAction
	Row    sbRow
}

// sandboxConfirm asks before a destructive action (stop, archive,
// remove): the GET changes nothing.
func (c *Console) sandboxConfirm(w http.ResponseWriter, r *http.Request, s *session) {
	a, ok := sbActions[r.PathValue("action")]
	if !ok || !a.Confirm {
		c.failBack(w, r, s, errs.New(errs.NotFound, "no confirmation page for %q (stop, archive, remove)", r.PathValue("action")), "sandboxes", "Sandboxes")
		return
	}
	sb, err := c.findSandbox(s, r.PathValue("id"))
	if err != nil {
		c.failBack(w, r, s, err, "sandboxes", "Sandboxes")
		return
	}
	c.render(w, http.StatusOK, c.view("sandbox_confirm", s, sandboxConfirmData{Action: a, Row: sandboxRow(sb, c.opts.Now(), s.who.Admin)}))
}

// sandboxAction runs an action, as agentctl sandbox ACTION ID does (the
// service checks the role), and returns to the Sandboxes page saying
// what it did.
func (c *Console) sandboxAction(w http.ResponseWriter, r *http.Request, s *session) {
	id, action := r.PathValue("id"), r.PathValue("action")
	a, ok := sbActions[action]
	var err error
	switch {
	case !ok:
		err = errs.New(errs.NotFound, "no sandbox action %q (pause, resume, stop, start, archive, restore, remove)", action)
	case a.Name == "remove":
		_, err = c.opts.Backend.Environments().RemoveSandbox(s.ctx, &hubv1.RemoveSandboxRequest{Id: id})
	default:
		_, err = c.opts.Backend.Environments().ChangeSandboxState(s.ctx, &hubv1.ChangeSandboxStateRequest{Id: id, Action: a.Name})
	}
	if err != nil {
		c.failBack(w, r, s, err, "sandboxes", "Sandboxes")
		return
	}
	http.Redirect(w, r, Prefix+"sandboxes?"+url.Values{"done": {a.Name}, "id": {id}}.Encode(), http.StatusSeeOther)
}
