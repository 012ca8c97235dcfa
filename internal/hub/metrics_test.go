package hub_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

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
	resp, err := http.Get(h.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
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
