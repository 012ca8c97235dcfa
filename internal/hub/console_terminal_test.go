package hub_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// termConn is a page's websocket to a console terminal.
type termConn struct {
	t   *testing.T
	ws  *websocket.Conn
	id  string // the process, from "started"
	out strings.Builder
	end int64 // offset after the last output byte seen
	ctl []map[string]any
}

// dialTerm opens /console/terminal/MACHINE/ws as the browser b, with
// query q (p, from, rows, cols), and reads its "started".
func dialTerm(t *testing.T, b *browser, machine string, q url.Values) *termConn {
	t.Helper()
	tc, resp, err := dialTermRaw(t, b, machine, q, "")
	if err != nil {
		t.Fatalf("dial terminal: %v (%v)", err, resp)
	}
	tc.until(func() bool { return tc.id != "" }, "started")
	return tc
}

func dialTermRaw(t *testing.T, b *browser, machine string, q url.Values, origin string) (*termConn, *http.Response, error) {
	u, _ := url.Parse(b.base + "/console/terminal/" + machine + "/ws?" + q.Encode())
	h := http.Header{}
	for _, c := range b.c.Jar.Cookies(u) {
		h.Add("Cookie", c.Name+"="+c.Value)
	}
	if origin != "" {
		h.Set("Origin", origin)
	}
	ws, resp, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(u.String(), "http"), &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		return nil, resp, err
	}
	tc := &termConn{t: t, ws: ws}
	t.Cleanup(func() { ws.CloseNow() })
	return tc, resp, nil
}

// until reads messages until ok() or 20 s pass.
func (tc *termConn) until(ok func() bool, what string) {
	tc.t.Helper()
	ctx, cancel := context.WithTimeout(tc.t.Context(), 20*time.Second)
	defer cancel()
	for !ok() {
		typ, data, err := tc.ws.Read(ctx)
		if err != nil {
			tc.t.Fatalf("waiting for %s: %v; output so far %q, control %v", what, err, tc.out.String(), tc.ctl)
		}
		if typ == websocket.MessageBinary {
			at := int64(binary.BigEndian.Uint64(data))
			if at+int64(len(data)-8) > tc.end {
				tc.out.Write(data[8+max(0, tc.end-at):])
				tc.end = at + int64(len(data)-8)
			}
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			tc.t.Fatalf("bad control message %q: %v", data, err)
		}
		tc.ctl = append(tc.ctl, m)
		if m["t"] == "started" {
			tc.id, _ = m["id"].(string)
		}
	}
}

func (tc *termConn) sees(s string) {
	tc.t.Helper()
	tc.until(func() bool { return strings.Contains(tc.out.String(), s) }, quote(s))
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

func (tc *termConn) typed(s string) {
	tc.t.Helper()
	if err := tc.ws.Write(tc.t.Context(), websocket.MessageBinary, []byte(s)); err != nil {
		tc.t.Fatal(err)
	}
}

func (tc *termConn) send(m map[string]any) {
	tc.t.Helper()
	b, _ := json.Marshal(m)
	if err := tc.ws.Write(tc.t.Context(), websocket.MessageText, b); err != nil {
		tc.t.Fatal(err)
	}
}

func (tc *termConn) control(kind string) map[string]any {
	tc.t.Helper()
	var got map[string]any
	tc.until(func() bool {
		for _, m := range tc.ctl {
			if m["t"] == kind {
				got = m
				return true
			}
		}
		return false
	}, kind)
	return got
}

// TestConsoleTerminal drives a machine's terminal over the console's real
// websocket, as the page does: start a shell, type, see the output; drop
// the connection and reattach with replay; a second tab on the same PTY
// sees what the first types; resize reaches the PTY; End session ends it;
// activity has who opened it, bytes each way, and not the keystrokes.
func TestConsoleTerminal(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	m := h.startShellMachine(h.owner)
	b := newBrowser(t, h.url)
	b.signIn(h.owner)

	p := b.get("/console/terminal/" + m.id)
	if p.code != http.StatusOK || !strings.Contains(p.body, `data-ws="/console/terminal/`+m.id+`/ws"`) || !strings.Contains(p.body, "End session") {
		t.Fatalf("terminal page: %d\n%s", p.code, p.body)
	}
	if strings.Contains(p.body, "Recorded:") {
		t.Error("the page says keystrokes are recorded; this hub does not record them")
	}
	checkPage(t, "terminal page", p)
	if p := b.get("/console/machines"); !strings.Contains(p.body, `href="/console/terminal/`+m.id+`"`) {
		t.Errorf("machines page has no Open terminal link for the online machine:\n%s", p.body)
	}

	one := dialTerm(t, b, m.id, url.Values{"rows": {"24"}, "cols": {"80"}})
	one.typed("echo hi-$((6*7))\r")
	one.sees("hi-42")

	// A second tab on the same PTY sees what the first types.
	two := dialTerm(t, b, m.id, url.Values{"p": {one.id}, "from": {"0"}})
	if two.id != one.id {
		t.Fatalf("second tab attached to %s, want %s", two.id, one.id)
	}
	two.sees("hi-42") // replay
	one.typed("echo second-$((1+1))\r")
	two.sees("second-2")

	// Drop the first connection: the shell keeps running, and a page
	// reattaching from its last offset gets only what came after.
	one.ws.CloseNow()
	two.typed("echo after-drop\r")
	two.sees("after-drop")
	three := dialTerm(t, b, m.id, url.Values{"p": {one.id}, "from": {"0"}})
	three.sees("after-drop")
	if !strings.Contains(three.out.String(), "hi-42") {
		t.Errorf("replay from 0 lacks the first command: %q", three.out.String())
	}

	// Resize reaches the PTY.
	three.send(map[string]any{"t": "resize", "rows": 33, "cols": 101})
	three.typed("stty size\r")
	three.sees("33 101")

	// End session ends the shell; every tab hears it.
	three.send(map[string]any{"t": "end"})
	if x := three.control("exit"); !strings.Contains(x["text"].(string), "HUP") && !strings.Contains(x["text"].(string), "KILL") {
		t.Errorf("exit after End session = %v, want a hang-up", x)
	}
	two.control("exit")

	// Activity: who opened a terminal where, how it ended, bytes each
	// way; no keystrokes.
	recs := h.terminalRecords(t, 3)
	var opened, ended bool
	for _, r := range recs {
		if r.GetKind() == "terminal.input" {
			t.Errorf("keystrokes recorded without --record-terminal-input: %v", r)
		}
		if r.GetKind() != "terminal" {
			continue
		}
		if r.GetActor() != "tester" || r.GetObjectId() != one.id {
			t.Errorf("terminal record %v: want actor tester, process %s", r, one.id)
		}
		if strings.HasPrefix(r.GetSummary(), "opened a terminal on "+m.id) && strings.Contains(r.GetSummary(), "bytes typed") {
			opened = true
		}
		if strings.Contains(r.GetSummary(), "End session") {
			ended = true
		}
		if len(r.GetOutput()) != 0 {
			t.Errorf("terminal record carries bytes: %q", r.GetOutput())
		}
	}
	if !opened || !ended {
		t.Errorf("activity lacks the opening or the End session: %v", recs)
	}
	// The console's activity links a terminal's record to the terminal.
	if p := b.get("/console/activity"); !strings.Contains(p.body, `href="/console/terminal/`+m.id+`?p=`+one.id+`"`) {
		t.Errorf("activity page has no link back to the terminal:\n%s", p.body)
	}
}

// terminalRecords waits for at least n records of kind terminal* in the
// org's activity and returns them.
func (h *hubEnv) terminalRecords(t *testing.T, n int) []*agentdv1.ActivityRecord {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := hubv1.NewActivityServiceClient(h.conn()).Watch(authCtx(t.Context(), h.owner, ""), &hubv1.WatchRequest{Tail: 1000, NoFollow: true})
		if err != nil {
			t.Fatal(err)
		}
		var out []*agentdv1.ActivityRecord
		for {
			r, err := st.Recv()
			if err != nil {
				break
			}
			if strings.HasPrefix(r.GetRecord().GetKind(), "terminal") && r.GetSource() == "hub" {
				out = append(out, r.GetRecord())
			}
		}
		if len(out) >= n || time.Now().After(deadline) {
			return out
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestConsoleTerminalRecordsInput: with --record-terminal-input the page
// says so and activity has what was typed.
func TestConsoleTerminalRecordsInput(t *testing.T) {
	t.Parallel()
	hb := hubtest.Start(t, hubtest.Options{RecordTerminalInput: true})
	h := &hubEnv{t: t, hub: hb, store: hb.Store, owner: hb.Token}
	h.sync()
	m := h.startShellMachine(h.owner)
	b := newBrowser(t, h.url)
	b.signIn(h.owner)
	if p := b.get("/console/terminal/" + m.id); !strings.Contains(p.body, "Recorded:") {
		t.Fatalf("the page does not say keystrokes are recorded:\n%s", p.body)
	}
	tc := dialTerm(t, b, m.id, nil)
	tc.typed("echo secret-typing\r")
	tc.sees("secret-typing")
	recs := h.terminalRecords(t, 1)
	found := false
	for _, r := range recs {
		if r.GetKind() == "terminal.input" && strings.Contains(string(r.GetOutput()), "echo secret-typing") && r.GetActor() == "tester" &&
			strings.Contains(r.GetSummary(), `typed "echo secret-typing\r" into terminal`) {
			found = true
		}
	}
	if !found {
		t.Errorf("no terminal.input record of what was typed: %v", recs)
	}
}

// TestConsoleTerminalRefusals: a foreign Origin, no session, a bad size,
// an unknown process, another org's machine: each refused, nothing
// started. A member is not refused (members exec through the API too).
func TestConsoleTerminalRefusals(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	m := h.startShellMachine(h.owner)
	b := newBrowser(t, h.url)
	b.signIn(h.owner)

	if _, resp, err := dialTermRaw(t, b, m.id, nil, "https://evil.example"); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin websocket: err %v, resp %v; want 403", err, resp)
	}
	anon := newBrowser(t, h.url)
	if _, resp, err := dialTermRaw(t, anon, m.id, nil, ""); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("websocket without a session: err %v, resp %v; want 401", err, resp)
	}
	if _, resp, err := dialTermRaw(t, b, m.id, url.Values{"rows": {"0"}}, ""); err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("rows=0: err %v, resp %v; want 400", err, resp)
	}
	tc, _, err := dialTermRaw(t, b, m.id, url.Values{"p": {"no-such-process"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if e := tc.control("error"); !strings.Contains(e["text"].(string), "no-such-process") {
		t.Errorf("unknown process: %v", e)
	}
	// A member may open a terminal, as a member may exec through the API.
	memberTok, _ := h.newToken("mia", store.RoleMember)
	mia := newBrowser(t, h.url)
	mia.signIn(memberTok)
	if p := mia.get("/console/terminal/" + m.id); p.code != http.StatusOK {
		t.Errorf("a member's terminal page = %d, want 200", p.code)
	}
	mt := dialTerm(t, mia, m.id, nil)
	mt.typed("echo member-$((2+3))\r")
	mt.sees("member-5")

	// Another org's admin does not find the machine.
	o2, err := h.store.CreateOrg(t.Context(), "other", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tok, hash := store.NewToken()
	if _, err := h.store.CreateToken(t.Context(), store.Token{OrgID: o2.ID, Name: "eve", Role: store.RoleAdmin, Hash: hash, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	eve := newBrowser(t, h.url)
	eve.signIn(tok)
	if p := eve.get("/console/terminal/" + m.id); p.code != http.StatusNotFound {
		t.Errorf("another org's terminal page = %d, want 404", p.code)
	}
	tc, _, err = dialTermRaw(t, eve, m.id, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if e := tc.control("error"); !strings.Contains(e["text"].(string), "not found") {
		t.Errorf("another org's machine: %v", e)
	}
}

// TestConsoleTerminalSessionAndBadInput: a message over the size limit
// closes that connection only (the shell runs on, and reattaching works);
// a revoked token ends its open terminals, saying why, and the page does
// not reconnect (final).
func TestConsoleTerminalSessionAndBadInput(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	m := h.startShellMachine(h.owner)
	secret, tok := h.newToken("mia", store.RoleMember)
	b := newBrowser(t, h.url)
	b.signIn(secret)

	tc := dialTerm(t, b, m.id, nil)
	tc.typed("echo before-$((1+1))\r")
	tc.sees("before-2")
	if err := tc.ws.Write(t.Context(), websocket.MessageBinary, make([]byte, 100<<10)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for {
		if _, _, err := tc.ws.Read(ctx); err != nil {
			if websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
				t.Errorf("after a 100 KiB message: %v, want close 1009 (message too big)", err)
			}
			break
		}
	}
	again := dialTerm(t, b, m.id, url.Values{"p": {tc.id}})
	again.typed("echo still-$((2+2))\r")
	again.sees("still-4")

	if err := h.store.RevokeToken(t.Context(), h.hub.Org.ID, tok.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	e := again.control("error")
	if !strings.Contains(e["text"].(string), "sign in again") || e["final"] != true {
		t.Errorf("after the token's revocation: %v, want a final error saying to sign in again", e)
	}
}

// TestConsoleTerminalWakesSandbox: a terminal on a paused sandbox wakes
// it, as any call does, and then works (the real engine).
func TestConsoleTerminalWakesSandbox(t *testing.T) {
	h := startSandboxHub(t, nil)
	if out, code, err := h.run(h.ctx("builtin", "term-wake"), "true"); err != nil || code != 0 {
		t.Fatalf("make the sandbox: %v %d %s", err, code, out)
	}
	sbs, err := h.Store.ListSandboxes(t.Context(), h.Org.ID)
	if err != nil || len(sbs) != 1 {
		t.Fatalf("sandboxes: %v %v", sbs, err)
	}
	id := sbs[0].ID
	if code, out, errs := h.agentctl()("sandbox", "pause", id); code != 0 {
		t.Fatalf("sandbox pause = %d %q %q", code, out, errs)
	}
	if sb, err := h.Store.Sandbox(t.Context(), id); err != nil || sb.State != store.SandboxPaused {
		t.Fatalf("after pause: %+v %v", sb, err)
	}
	b := newBrowser(t, h.URL)
	b.signIn(h.Token)
	tc := dialTerm(t, b, id, nil)
	tc.typed("echo woke-$((3*3))\r")
	tc.sees("woke-9")
	if sb, err := h.Store.Sandbox(t.Context(), id); err != nil || sb.State != store.SandboxRunning {
		t.Errorf("after the terminal: %+v %v, want running", sb, err)
	}
}
