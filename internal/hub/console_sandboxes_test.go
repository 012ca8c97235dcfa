package hub_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// sandboxState is a sandbox's state as ListSandboxes has it ("" if it is
// not listed).
func (f *fakeSandboxHub) sandboxState(t *testing.T, id string) string {
	t.Helper()
	resp, err := hubv1.NewEnvironmentServiceClient(f.cc).ListSandboxes(f.call(""), &hubv1.ListSandboxesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range resp.GetSandboxes() {
		if sb.GetId() == id {
			return sb.GetState()
		}
	}
	return ""
}

// memberToken stores a member token in the hub's org.
func (f *fakeSandboxHub) memberToken(t *testing.T, name string) string {
	t.Helper()
	secret, hash := store.NewToken()
	if _, err := f.h.Store.CreateToken(t.Context(), store.Token{OrgID: f.h.Org.ID, Name: name, Role: store.RoleMember, Hash: hash, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return secret
}

// row is the part of the Sandboxes page that is id's row.
func sandboxRowHTML(t *testing.T, body, id string) string {
	t.Helper()
	i := strings.Index(body, `<tr id="sb-row-`+id+`">`)
	if i < 0 {
		t.Fatalf("no row for %s:\n%s", id, body)
	}
	row := body[i:]
	if j := strings.Index(row, "</tr>"); j >= 0 {
		row = row[:j]
	}
	return row
}

// TestConsoleSandboxes: the Sandboxes page lists the org's sandboxes with
// sandbox ls's columns and, per row, the buttons of its state; Pause posts
// at once, Stop and Remove go through a confirmation page whose GET
// changes nothing; a cross-origin POST is refused; a member sees only the
// buttons a member may use (resume, start, restore) and is refused the
// others; Archive (confirmed) and Restore work; Remove removes. The fake driver: the page is the point.
func TestConsoleSandboxes(t *testing.T) {
	st, _ := openArchive(t)
	f := startFakeSandboxHub(t, func(o *sandboxes.Options) { o.Archive = st })
	sb1, err := f.info("chat-1")
	if err != nil {
		t.Fatal(err)
	}
	sb2, err := f.info("chat-2")
	if err != nil {
		t.Fatal(err)
	}
	admin := newBrowser(t, f.h.URL)
	admin.signIn(f.h.Token)

	p := admin.get("/console/sandboxes")
	if p.code != http.StatusOK {
		t.Fatalf("sandboxes page: %d\n%s", p.code, p.body)
	}
	checkPage(t, "sandboxes", p)
	for _, want := range []string{`href="/console/sandboxes" aria-current="page"`, ">ID<", ">Env<", ">Conversation<", ">State<", ">Online<",
		">Created<", ">Last used<", ">Next<", ">Size<", ">Image<", "chat-1", "chat-2", "builtin"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("sandboxes page lacks %q:\n%s", want, p.body)
		}
	}
	row := sandboxRowHTML(t, p.body, sb1)
	for _, want := range []string{`state running`, `action="/console/sandboxes/` + sb1 + `/pause"`, `href="/console/sandboxes/` + sb1 + `/stop"`,
		`href="/console/sandboxes/` + sb1 + `/archive"`, `href="/console/sandboxes/` + sb1 + `/remove"`, "<td>yes</td>"} {
		if !strings.Contains(row, want) {
			t.Errorf("running row lacks %q:\n%s", want, row)
		}
	}
	for _, not := range []string{"/resume", "/start", "/restore", `action="/console/sandboxes/` + sb1 + `/stop"`} {
		if strings.Contains(row, not) {
			t.Errorf("running row has %q:\n%s", not, row)
		}
	}

	// Pause: a POST from the row, then the page says so.
	p = admin.post("/console/sandboxes/"+sb1+"/pause", nil)
	if p.code != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/console/sandboxes?") {
		t.Fatalf("pause: %d %s\n%s", p.code, p.header.Get("Location"), p.body)
	}
	if got := f.sandboxState(t, sb1); got != "paused" {
		t.Fatalf("after the console's pause %s is %q", sb1, got)
	}
	p = admin.get(p.header.Get("Location"))
	if !strings.Contains(p.body, "Sandbox "+sb1+" paused.") {
		t.Errorf("the page does not say the pause was done:\n%s", p.body)
	}
	row = sandboxRowHTML(t, p.body, sb1)
	if !strings.Contains(row, "state paused") || !strings.Contains(row, `action="/console/sandboxes/`+sb1+`/resume"`) || strings.Contains(row, "/pause") {
		t.Errorf("paused row:\n%s", row)
	}
	// A crafted link does not put words on the page.
	if p := admin.get("/console/sandboxes?done=remove&id=" + sb2); strings.Contains(p.body, "removed") {
		t.Errorf("a crafted link says %s was removed", sb2)
	}

	// Stop and Remove confirm first: their GETs change nothing.
	stop := "/console/sandboxes/" + sb2 + "/stop"
	p = admin.get(stop)
	if p.code != http.StatusOK || !strings.Contains(p.body, "Stop sandbox "+sb2+"?") || !strings.Contains(p.body, `action="`+stop+`"`) {
		t.Fatalf("stop confirmation: %d\n%s", p.code, p.body)
	}
	checkPage(t, "stop confirmation", p)
	p = admin.get("/console/sandboxes/" + sb2 + "/remove")
	if p.code != http.StatusOK || !strings.Contains(p.body, "/workspace: the files in it are deleted") {
		t.Fatalf("remove confirmation: %d\n%s", p.code, p.body)
	}
	if p := admin.get("/console/sandboxes/" + sb2 + "/pause"); p.code != http.StatusNotFound {
		t.Errorf("GET of pause: %d, want 404 (no confirmation page; only a POST pauses)", p.code)
	}
	if p := admin.get("/console/sandboxes/sb-nosuch/stop"); p.code != http.StatusNotFound {
		t.Errorf("confirmation for an unknown sandbox: %d, want 404", p.code)
	}
	if got := f.sandboxState(t, sb2); got != "running" {
		t.Fatalf("after the confirmation pages %s is %q", sb2, got)
	}

	// Cross-origin POSTs are refused and change nothing.
	for _, hdr := range [][]string{{"Sec-Fetch-Site", "cross-site"}, {"Sec-Fetch-Site", "", "Origin", "http://evil.example"}} {
		if p := admin.post(stop, nil, hdr...); p.code != http.StatusForbidden {
			t.Errorf("cross-origin POST %v: %d, want 403", hdr, p.code)
		}
	}
	if got := f.sandboxState(t, sb2); got != "running" {
		t.Fatalf("after refused POSTs %s is %q", sb2, got)
	}

	// A member sees the sandboxes, and only the buttons a member may use.
	member := newBrowser(t, f.h.URL)
	member.signIn(f.memberToken(t, "mia"))
	p = member.get("/console/sandboxes")
	checkPage(t, "sandboxes as a member", p)
	row = sandboxRowHTML(t, p.body, sb2)
	for _, not := range []string{"/pause", "/stop", "/archive", "/remove"} {
		if strings.Contains(row, not) {
			t.Errorf("a member's running row has %q:\n%s", not, row)
		}
	}
	if row := sandboxRowHTML(t, p.body, sb1); !strings.Contains(row, sb1+`/resume"`) {
		t.Errorf("a member's paused row has no Resume:\n%s", row)
	}
	if p := member.post(stop, nil); p.code != http.StatusForbidden || !strings.Contains(p.body, `<a href="/console/sandboxes">Back to Sandboxes</a>`) {
		t.Errorf("a member's stop: %d, want 403 and a way back\n%s", p.code, p.body)
	}
	if p := member.post("/console/sandboxes/"+sb2+"/remove", nil); p.code != http.StatusForbidden {
		t.Errorf("a member's remove: %d, want 403", p.code)
	}
	if got := f.sandboxState(t, sb2); got != "running" {
		t.Fatalf("after a member's refused stop %s is %q", sb2, got)
	}
	if p := member.post("/console/sandboxes/"+sb1+"/resume", nil); p.code != http.StatusSeeOther {
		t.Fatalf("a member's resume: %d\n%s", p.code, p.body)
	}
	if got := f.sandboxState(t, sb1); got != "running" {
		t.Fatalf("after a member's resume %s is %q", sb1, got)
	}

	// Archive through its confirmation, then Restore from the row (a
	// member may restore).
	sb3, err := f.info("chat-3")
	if err != nil {
		t.Fatal(err)
	}
	archive := "/console/sandboxes/" + sb3 + "/archive"
	if p := admin.get(archive); p.code != http.StatusOK || !strings.Contains(p.body, "Archive sandbox "+sb3+"?") || !strings.Contains(p.body, `action="`+archive+`"`) {
		t.Fatalf("archive confirmation: %d\n%s", p.code, p.body)
	}
	if got := f.sandboxState(t, sb3); got != "running" {
		t.Fatalf("after the archive confirmation %s is %q", sb3, got)
	}
	if p := admin.post(archive, nil); p.code != http.StatusSeeOther {
		t.Fatalf("archive: %d\n%s", p.code, p.body)
	}
	if got := f.sandboxState(t, sb3); got != "archived" {
		t.Fatalf("after the console's archive %s is %q", sb3, got)
	}
	row = sandboxRowHTML(t, admin.get("/console/sandboxes").body, sb3)
	if !strings.Contains(row, "state archived") || !strings.Contains(row, sb3+`/restore"`) || !strings.Contains(row, sb3+`/remove"`) ||
		strings.Contains(row, "/stop") || strings.Contains(row, "/pause") || strings.Contains(row, "/archive") {
		t.Errorf("archived row:\n%s", row)
	}
	if p := member.post("/console/sandboxes/"+sb3+"/restore", nil); p.code != http.StatusSeeOther {
		t.Fatalf("a member's restore: %d\n%s", p.code, p.body)
	}
	if got := f.sandboxState(t, sb3); got != "running" {
		t.Fatalf("after the console's restore %s is %q", sb3, got)
	}

	// The admin confirms Stop, then Remove.
	if p := admin.post(stop, nil); p.code != http.StatusSeeOther {
		t.Fatalf("stop: %d\n%s", p.code, p.body)
	}
	if got := f.sandboxState(t, sb2); got != "stopped" {
		t.Fatalf("after the console's stop %s is %q", sb2, got)
	}
	row = sandboxRowHTML(t, admin.get("/console/sandboxes").body, sb2)
	if !strings.Contains(row, "state stopped") || !strings.Contains(row, sb2+`/start"`) || strings.Contains(row, "/pause") {
		t.Errorf("stopped row:\n%s", row)
	}
	p = admin.post("/console/sandboxes/"+sb2+"/remove", nil)
	if p.code != http.StatusSeeOther {
		t.Fatalf("remove: %d\n%s", p.code, p.body)
	}
	if got := f.sandboxState(t, sb2); got != "" {
		t.Fatalf("after the console's remove %s is %q", sb2, got)
	}
	if p := admin.get(p.header.Get("Location")); !strings.Contains(p.body, "Sandbox "+sb2+" removed") || strings.Contains(p.body, "sb-row-"+sb2) {
		t.Errorf("the page after remove:\n%s", p.body)
	}
	if p := admin.post("/console/sandboxes/"+sb2+"/stop", nil); p.code != http.StatusNotFound {
		t.Errorf("stop of a removed sandbox: %d, want 404", p.code)
	}
}
