package hub

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/devdepot-ai/agentd/internal/agentimage"
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
