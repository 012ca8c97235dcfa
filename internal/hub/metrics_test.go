package hub_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	"github.com/devdepot-ai/agentd/transport"
)

// /metrics counts refused tunnel handshakes by reason.
func TestMetricsRefusedHandshakes(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	for range 3 {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		ws, _, err := websocket.Dial(ctx, h.url+transport.Path, &websocket.DialOptions{
			HTTPHeader:   http.Header{transport.HeaderMachine: {"m-nobody"}},
			Subprotocols: []string{transport.Subprotocol},
		})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		if _, _, err := ws.Read(ctx); err != nil { // the challenge
			t.Fatal(err)
		}
		if err := ws.Write(ctx, websocket.MessageText, []byte("not a response")); err != nil {
			t.Fatal(err)
		}
		// The verdict comes after the hub counted the refusal.
		if _, verdict, err := ws.Read(ctx); err != nil || !strings.Contains(string(verdict), "bad_request") {
			t.Fatalf("verdict %s (%v), want a bad_request rejection", verdict, err)
		}
		ws.CloseNow()
		cancel()
	}
	code, body := getMetrics(t, h.url, h.owner)
	if code != http.StatusOK {
		t.Fatalf("/metrics with the owner's token: %d %s", code, body)
	}
	for _, want := range []string{
		"# TYPE agenthub_tunnel_handshakes_refused_total counter\n",
		"agenthub_tunnel_handshakes_refused_total{reason=\"bad_request\"} 3\n",
		"agenthub_tunnel_handshakes_refused_total{reason=\"bad_signature\"} 0\n",
		"agenthub_tunnel_handshakes_refused_total{reason=\"timeout\"} 0\n",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
}

// getMetrics GETs url/metrics with token ("": none) and returns the status
// and body.
func getMetrics(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// /metrics shows every org's calls and refusals: on the hub's port only
// the hub owner's token reads it, not an admin or member of another org,
// nor a member of the owner's org, nor a client without a token.
func TestMetricsNeedsOwnerToken(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	admin := hubv1.NewAdminServiceClient(h.conn())
	ctx := authCtx(t.Context(), h.owner, "")
	if _, err := admin.CreateOrg(ctx, &hubv1.CreateOrgRequest{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	token := func(org string, role hubv1.Role) string {
		r, err := admin.CreateToken(ctx, &hubv1.CreateTokenRequest{Org: org, Name: "t-" + org + role.String(), Role: role})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetSecret()
	}
	for _, tc := range []struct {
		name  string
		token string
		want  int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"not a token", "hello", http.StatusUnauthorized},
		{"unknown token", "agt_" + strings.Repeat("x", 43), http.StatusUnauthorized},
		{"member of the owner's org", token("", hubv1.Role_ROLE_MEMBER), http.StatusForbidden},
		{"admin of another org", token("other", hubv1.Role_ROLE_ADMIN), http.StatusForbidden},
		{"owner", h.owner, http.StatusOK},
	} {
		code, body := getMetrics(t, h.url, tc.token)
		if code != tc.want {
			t.Errorf("%s: /metrics %d, want %d\n%s", tc.name, code, tc.want, body)
		}
		if leaked := strings.Contains(body, "agenthub_grpc_calls_total"); leaked != (tc.want == http.StatusOK) {
			t.Errorf("%s: body shows the metrics: %v, want %v", tc.name, leaked, tc.want == http.StatusOK)
		}
	}
}
