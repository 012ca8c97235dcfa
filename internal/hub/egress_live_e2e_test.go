package hub_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/ctl"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
)

// An environment's allow list (env set builtin --allow) gives its new
// sandboxes the hub's egress proxy to the list; an admin changes a
// running sandbox's list with sandbox allow | deny: the next connection
// sees the new generation at once, an open connection stays unless --cut
// (then it is closed within a second); each change is in the activity,
// sandbox ls --json shows the list and its generation; a bad destination,
// a member token, and a sandbox made without a list change nothing.
func TestSandboxAllowDenyLive(t *testing.T) {
	streaming := make(chan struct{}, 1)
	streamEnded := make(chan time.Time, 1)
	quit := make(chan struct{}) // ends the download for srv.Close, should a failure leave it open
	ended := func() {
		select {
		case streamEnded <- time.Now():
		default:
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/stream" {
			fmt.Fprintf(w, "hello from %s\n", r.Host)
			return
		}
		// A long download: a line every 50 ms until the client is gone.
		streaming <- struct{}{}
		for {
			if _, err := fmt.Fprintln(w, "tick"); err != nil {
				ended()
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				ended()
				return
			case <-quit:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}))
	defer srv.Close()
	defer close(quit)
	dial := func(ctx context.Context, host string, port int) (net.Conn, error) {
		switch fmt.Sprintf("%s:%d", host, port) {
		case "a.example.com:80", "b.example.com:80":
			return (&net.Dialer{}).DialContext(ctx, "tcp", srv.Listener.Addr().String())
		}
		return nil, errors.New("the test knows no such host") // never a real address
	}
	h := startSandboxHubWith(t, func(o *sandboxes.Options) { o.EgressDial = dial }, hubtest.Options{})
	run := h.agentctl()

	// The environment's list, for its new sandboxes; a bad entry changes nothing.
	if code, out, errs := run("env", "set", "builtin", "--allow", "a.example.com:80,https://x"); code == 0 || !strings.Contains(errs, "not a URL") {
		t.Errorf("env set --allow with a URL = %d %q %q; want refused", code, out, errs)
	}
	if code, out, errs := run("env", "set", "builtin", "--allow", "a.example.com:80"); code != 0 ||
		!strings.Contains(out, "a.example.com:80 (new sandboxes reach only these") {
		t.Fatalf("env set builtin --allow = %d %q %q", code, out, errs)
	}
	if code, out, _ := run("--json", "env", "show", "builtin"); code != 0 || !strings.Contains(out, `"allow":["a.example.com:80"]`) {
		t.Errorf("env show --json lacks the allow list: %s", out)
	}
	target := []string{"--env", "builtin", "--conversation", "live"}
	sh := func(script string) (int, string, string) { return run(append(target, "sh", script)...) }
	if code, out, errs := sh("curl -sS http://a.example.com/x"); code != 0 || out != "hello from a.example.com\n" {
		t.Fatalf("curl a (allowed by the environment) = %d %q %q", code, out, errs)
	}
	const refusedB = "agentd egress proxy: b.example.com:80 is not on this sandbox's allow list"
	if code, out, _ := sh("curl -sS http://b.example.com/x"); code != 0 || !strings.HasPrefix(out, refusedB) {
		t.Errorf("curl b (not allowed) = %d %q", code, out)
	}
	sbs, err := h.Store.ListSandboxes(t.Context(), h.Org.ID)
	if err != nil {
		t.Fatal(err)
	}
	id := ""
	for _, sb := range sbs {
		if sb.Conversation == "live" {
			id = sb.ID
		}
	}
	if id == "" {
		t.Fatalf("no sandbox for the conversation in %+v", sbs)
	}

	// A download through a that stays open.
	if code, out, errs := sh("setsid sh -c 'curl -sSN http://a.example.com/stream >/dev/null 2>&1' </dev/null >/dev/null 2>&1 &"); code != 0 {
		t.Fatalf("start the download: %d %q %q", code, out, errs)
	}
	select {
	case <-streaming:
	case <-time.After(30 * time.Second):
		t.Fatal("the download did not start")
	}

	// allow b: generation 2, the next connection to b goes through.
	if code, out, errs := run("sandbox", "allow", id, "b.example.com:80"); code != 0 ||
		out != id+" allow list now, generation 2: a.example.com:80, b.example.com:80\n" {
		t.Errorf("sandbox allow = %d %q %q", code, out, errs)
	}
	if code, out, errs := sh("curl -sS http://b.example.com/x"); code != 0 || out != "hello from b.example.com\n" {
		t.Errorf("curl b after allow = %d %q %q", code, out, errs)
	}
	// deny a without --cut: the next connection to a is refused, the
	// download goes on.
	if code, out, errs := run("sandbox", "deny", id, "a.example.com"); code != 0 ||
		out != id+" allow list now, generation 3: b.example.com:80\n" {
		t.Errorf("sandbox deny = %d %q %q", code, out, errs)
	}
	if code, out, _ := sh("curl -sS http://a.example.com/x"); code != 0 || !strings.HasPrefix(out, "agentd egress proxy: a.example.com:80 is not on this sandbox's allow list (b.example.com:80)") {
		t.Errorf("curl a after deny = %d %q", code, out)
	}
	select {
	case at := <-streamEnded:
		t.Fatalf("a deny without --cut ended the open download (at %v)", at)
	case <-time.After(1500 * time.Millisecond): // three recheck intervals: none may cut it
	}

	// Bad input and a member change nothing.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sandbox", "allow", id, "10.0.0.1"}, "not an IP address"},
		{[]string{"sandbox", "deny", id, "c.example.com"}, "c.example.com is not on the sandbox's allow list (b.example.com:80); nothing changed"},
		{[]string{"sandbox", "allow", "sb-nosuch", "c.example.com"}, "sandbox sb-nosuch not found"},
		{[]string{"sandbox", "allow", id}, "needs a sandbox id"},
	} {
		if code, out, errs := run(tc.args...); code == 0 || out != "" || !strings.Contains(errs, tc.want) {
			t.Errorf("%v = %d %q %q; want refused with %q", tc.args, code, out, errs, tc.want)
		}
	}
	member := h.tokenCtl(t, "mallory", store.RoleMember)
	if code, _, errs := member("sandbox", "allow", id, "c.example.com"); code == 0 || !strings.Contains(errs, "PermissionDenied") && !strings.Contains(errs, "needs an admin token") {
		t.Errorf("a member's sandbox allow = %d %q; want permission denied", code, errs)
	}
	if code, out, _ := run("--json", "sandbox", "ls"); code != 0 || !strings.Contains(out, `"generation":"3"`) && !strings.Contains(out, `"generation": "3"`) {
		t.Errorf("sandbox ls --json after the refusals: want generation 3:\n%s", out)
	}

	// deny --cut (a is off the list already: the point is the open
	// download): closed within a second.
	start := time.Now()
	if code, out, errs := run("sandbox", "deny", id, "a.example.com", "--cut"); code != 0 || out != id+" allow list now, generation 4: b.example.com:80\n" ||
		!strings.Contains(errs, "closed 1 open connection(s)") {
		t.Errorf("sandbox deny --cut = %d %q %q", code, out, errs)
	}
	select {
	case at := <-streamEnded:
		if d := at.Sub(start); d > time.Second {
			t.Errorf("the download ended %v after deny --cut; want within 1 s", d)
		}
	case <-time.After(10 * time.Second):
		t.Error("deny --cut left the download open")
	}
	if code, out, errs := sh("curl -sS http://b.example.com/x"); code != 0 || out != "hello from b.example.com\n" {
		t.Errorf("curl b after the cut = %d %q %q", code, out, errs)
	}

	// The activity: who, what, the generation.
	code, out, _ := run("activity", "--tail", "200")
	for _, want := range []string{
		"set the allow list of environment builtin's new sandboxes: a.example.com:80",
		"changed the allow list of " + id + " to generation 2: allowed b.example.com:80; now a.example.com:80, b.example.com:80",
		"changed the allow list of " + id + " to generation 3: denied a.example.com:80; now b.example.com:80",
		"changed the allow list of " + id + " to generation 4: cut open connections it no longer allows; now b.example.com:80",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("activity lacks %q:\n%s", want, out)
		}
	}
	var ls struct {
		Sandboxes []struct {
			ID     string `json:"id"`
			Egress struct {
				Allow      []string `json:"allow"`
				Generation string   `json:"generation"`
			} `json:"egress"`
		} `json:"sandboxes"`
	}
	if code, out, _ := run("--json", "sandbox", "ls"); code != 0 || json.Unmarshal([]byte(out), &ls) != nil {
		t.Fatalf("sandbox ls --json = %d %q", code, out)
	}
	for _, sb := range ls.Sandboxes {
		if sb.ID == id && (sb.Egress.Generation != "4" || strings.Join(sb.Egress.Allow, ",") != "b.example.com:80") {
			t.Errorf("sandbox ls --json: %s's egress %+v, want generation 4, b.example.com:80", id, sb.Egress)
		}
	}

	// --allow '' removes the environment's list: a new conversation's
	// sandbox has none, and none to change.
	if code, out, errs := run("env", "set", "builtin", "--allow", ""); code != 0 || strings.Contains(out, "allow") {
		t.Errorf("env set --allow '' = %d %q %q", code, out, errs)
	}
	if code, out, _ := run("activity", "--tail", "50"); code != 0 || !strings.Contains(out, "removed the allow list of environment builtin: its new sandboxes get its network") {
		t.Errorf("activity lacks the removal of the list:\n%s", out)
	}
	if code, out, errs := run("--env", "builtin", "--conversation", "open", "sh", "true"); code != 0 {
		t.Fatalf("a sandbox without a list: %d %q %q", code, out, errs)
	}
	sbs, _ = h.Store.ListSandboxes(t.Context(), h.Org.ID)
	for _, sb := range sbs {
		if sb.Conversation == "open" {
			if code, _, errs := run("sandbox", "allow", sb.ID, "c.example.com"); code == 0 || !strings.Contains(errs, "was made without an allow list") ||
				!strings.Contains(errs, "env set ENV --allow") {
				t.Errorf("sandbox allow for one made without a list = %d %q", code, errs)
			}
		}
	}
}

// tokenCtl is agentctl with a new token of the org (name, role).
func (h *sandboxHub) tokenCtl(t *testing.T, name string, role store.Role) func(args ...string) (int, string, string) {
	secret, hash := store.NewToken()
	if _, err := h.Store.CreateToken(t.Context(), store.Token{OrgID: h.Org.ID, Name: name, Role: role, Hash: hash, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	return func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := ctl.Main(t.Context(), append([]string{"--hub", h.URL, "--token-file", tf}, args...),
			ctl.IO{In: strings.NewReader(""), Out: &out, Err: &errb})
		return code, out.String(), errb.String()
	}
}
