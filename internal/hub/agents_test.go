package hub

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/devdepot-ai/agentd/internal/agentimage"
	"github.com/devdepot-ai/agentd/internal/rpcerr"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

func TestNewerVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"1.10.0", "1.9.0", true}, {"1.9.0", "1.10.0", false}, {"1.2.3", "1.2.3", false},
		{"1.2.4", "1.2.3", true}, {"2.0", "1.99.99", true}, {"1.2.3.1", "1.2.3", true},
		{"0.153.3", "0.160.0", false},
	} {
		if got := newerVersion(tc.a, tc.b); got != tc.want {
			t.Errorf("newerVersion(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// NPMReleases asks the registry (a loopback one here) once per package per
// hour, escapes scoped names, and has no answer for script installs.
func TestNPMReleases(t *testing.T) {
	t.Parallel()
	var asked []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.EscapedPath())
		mu.Unlock()
		if r.URL.EscapedPath() == "/@openai%2Fcodex/latest" {
			io.WriteString(w, `{"name":"@openai/codex","version":"0.160.0"}`)
			return
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	n := &NPMReleases{Registry: srv.URL}
	codex := agentimage.Profile{Name: "codex", Install: &agentimage.Install{NPM: "@openai/codex"}}
	for range 2 {
		if v, err := n.Latest(t.Context(), codex); err != nil || v != "0.160.0" {
			t.Fatalf("Latest(codex) = %q, %v", v, err)
		}
	}
	if _, err := n.Latest(t.Context(), agentimage.Profile{Name: "x", Install: &agentimage.Install{NPM: "nope"}}); err == nil {
		t.Error("a package the registry lacks: no error")
	}
	if v, err := n.Latest(t.Context(), agentimage.Profile{Name: "s", Install: &agentimage.Install{Script: []string{"true"}}}); v != "" || err != nil {
		t.Errorf("a script install: %q, %v; want no answer", v, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 || asked[0] != "/@openai%2Fcodex/latest" {
		t.Errorf("registry asked %v; want codex once (then cached), then nope", asked)
	}
}

// A run's network: the profile's allow list, plus --allow (deduplicated);
// --network open alone; bad entries and --allow with open refused.
func TestRunNetwork(t *testing.T) {
	t.Parallel()
	withList := agentimage.Profile{Name: "a", Network: agentimage.Network{Default: agentimage.NetworkAllow, Allow: []string{"api.example.com"}}}
	none := agentimage.Profile{Name: "b", Network: agentimage.Network{Default: agentimage.NetworkNone}}
	for _, tc := range []struct {
		p       agentimage.Profile
		network string
		allow   []string
		want    string // network, then the list; or the error
	}{
		{withList, "", nil, "none api.example.com:443"},
		{withList, "", []string{"api.example.com:443", "*.cdn.example.com", "x.example.com:8080"}, "none api.example.com:443,*.cdn.example.com:443,x.example.com:8080"},
		{none, "", nil, "none "},
		{none, "", []string{"api.openai.com"}, "none api.openai.com:443"},
		{withList, "open", nil, "public "},
		{withList, "open", []string{"x.example.com"}, "--allow adds to the restricted network"},
		{none, "", []string{"127.0.0.1"}, `--allow: invalid allow-list entry "127.0.0.1": want a host name, not an IP address`},
		{none, "wide", nil, `network "wide": want open`},
		{none, "", make([]string, 65), "--allow: 65 destinations; at most 64"},
	} {
		network, allow, err := runNetwork(tc.p, &hubv1.RunAgentRequest{Network: tc.network, Allow: tc.allow})
		got := network + " " + allow.String()
		if err != nil {
			got = rpcerr.Status(err).Error() // the code and message a caller gets
		}
		if (err == nil && got != tc.want) || !strings.Contains(got, tc.want) {
			t.Errorf("runNetwork(%s, %q, %q) = %q; want %q", tc.p.Name, tc.network, tc.allow, got, tc.want)
		}
	}
}

// TestAgentProfileByAlias: agent run's profile is found by its name or an
// alias ("claude"), and the run then carries the canonical name; an
// unknown name lists the canonical ones.
func TestAgentProfileByAlias(t *testing.T) {
	t.Parallel()
	g := &agentService{s: &Server{}} // no sandboxes: the built-in profiles
	for _, tc := range []struct{ name, want string }{
		{"claude-code", "claude-code"},
		{"claude", "claude-code"},
		{"codex", "codex"},
		{"commandcode", "commandcode"},
		{"cmd", `rpc error: code = InvalidArgument desc = unknown agent profile "cmd" (known: aider, claude-code, codex, commandcode, goose, opencode, pi)`},
	} {
		var got string
		if p, err := g.profile(tc.name); err != nil {
			got = rpcerr.Status(err).Error() // the code and message a caller gets
		} else {
			got = p.Name
		}
		if got != tc.want {
			t.Errorf("profile(%q) = %s, want %s", tc.name, got, tc.want)
		}
	}
}
