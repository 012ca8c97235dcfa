package transport_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/devdepot-ai/agentd/transport"
)

// wireMsg is the handshake on the wire, written out here so that the tests
// pin the protocol rather than reuse the package's own encoding.
type wireMsg struct {
	Type      string `json:"type"`
	Nonce     string `json:"nonce,omitempty"`
	Expires   string `json:"expires,omitempty"`
	Host      string `json:"host,omitempty"`
	Signature []byte `json:"signature,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Org       string `json:"org,omitempty"`
	Message   string `json:"message,omitempty"`
}

// rawClient is a hand-driven daemon: it dials the tunnel and speaks the
// handshake message by message.
type rawClient struct {
	t    *testing.T
	ws   *websocket.Conn
	host string
}

func dialRaw(t *testing.T, h *testHub, id string) *rawClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, h.url()+transport.Path, &websocket.DialOptions{
		HTTPHeader:   http.Header{transport.HeaderMachine: {id}},
		Subprotocols: []string{transport.Subprotocol},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	u, _ := url.Parse(h.url())
	return &rawClient{t: t, ws: ws, host: u.Host}
}

func (c *rawClient) read() (wireMsg, error) {
	ctx, cancel := context.WithTimeout(c.t.Context(), 5*time.Second)
	defer cancel()
	typ, data, err := c.ws.Read(ctx)
	if err != nil {
		return wireMsg{}, err
	}
	if typ != websocket.MessageText {
		c.t.Fatalf("hub sent a %v message during the handshake", typ)
	}
	var m wireMsg
	if err := json.Unmarshal(data, &m); err != nil {
		c.t.Fatalf("hub sent %q: %v", data, err)
	}
	return m, nil
}

func (c *rawClient) mustRead() wireMsg {
	c.t.Helper()
	m, err := c.read()
	if err != nil {
		c.t.Fatal(err)
	}
	return m
}

func (c *rawClient) send(typ websocket.MessageType, data []byte) {
	c.t.Helper()
	if err := c.ws.Write(c.t.Context(), typ, data); err != nil {
		c.t.Fatal(err)
	}
}

func (c *rawClient) answer(m wireMsg) {
	c.t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		c.t.Fatal(err)
	}
	c.send(websocket.MessageText, b)
}

// sign is the signature the protocol defines.
func sign(key ed25519.PrivateKey, host, id, nonce string) []byte {
	return ed25519.Sign(key, []byte("agentd-tunnel-v1|"+host+"|"+id+"|"+nonce))
}

func TestHandshakeChallenge(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	h := startHub(t, hubConfig{clock: clock})
	pub, key := newKey(t)
	h.addMachine("m-1", pub, "acme")
	c := dialRaw(t, h, "m-1")

	ch := c.mustRead()
	if ch.Type != "challenge" || len(ch.Nonce) != 43 {
		t.Fatalf("challenge %+v: want type challenge and a 32-byte base64url nonce", ch)
	}
	if want := clock.peek().Add(time.Minute).Format(time.RFC3339); ch.Expires != want {
		t.Errorf("expires %s, want %s (1 min)", ch.Expires, want)
	}
	c.answer(wireMsg{Type: "response", Nonce: ch.Nonce, Host: c.host, Signature: sign(key, c.host, "m-1", ch.Nonce)})
	if got := c.mustRead(); got.Type != "ok" {
		t.Fatalf("verdict %+v, want ok", got)
	}
	if _, err := h.reg.Wait(t.Context(), "m-1"); err != nil {
		t.Fatal(err)
	}
}

// Bad answers are refused with a reason, and nothing reaches the registry.
func TestHandshakeRefusals(t *testing.T) {
	t.Parallel()
	h := startHub(t, hubConfig{})
	pub, key := newKey(t)
	h.addMachine("m-1", pub, "acme")

	// A good exchange whose answer is replayed below.
	first := dialRaw(t, h, "m-1")
	ch1 := first.mustRead()
	good := wireMsg{Type: "response", Nonce: ch1.Nonce, Host: first.host, Signature: sign(key, first.host, "m-1", ch1.Nonce)}
	first.answer(good)
	if v := first.mustRead(); v.Type != "ok" {
		t.Fatalf("first exchange: %+v", v)
	}
	<-h.ups
	first.ws.CloseNow()
	waitDown(t, h, "m-1")

	t.Cleanup(func() { // after the subtests
		if n := h.reg.Len(); n != 0 {
			t.Errorf("registry holds %d tunnels after refused handshakes", n)
		}
	})
	forged := make([]byte, ed25519.SignatureSize)
	rand.Read(forged)
	for _, tc := range []struct {
		name   string
		id     string
		answer func(c *rawClient, ch wireMsg)
		want   string // reason
	}{
		{
			name: "replayed answer",
			id:   "m-1",
			answer: func(c *rawClient, _ wireMsg) {
				c.answer(good) // the first connection's nonce and signature
			},
			want: "replayed",
		},
		{
			name: "forged signature",
			id:   "m-1",
			answer: func(c *rawClient, ch wireMsg) {
				c.answer(wireMsg{Type: "response", Nonce: ch.Nonce, Host: c.host, Signature: forged})
			},
			want: "bad_signature",
		},
		{
			name: "signed for another machine",
			id:   "m-1",
			answer: func(c *rawClient, ch wireMsg) {
				c.answer(wireMsg{Type: "response", Nonce: ch.Nonce, Host: c.host, Signature: sign(key, c.host, "m-2", ch.Nonce)})
			},
			want: "bad_signature",
		},
		{
			name: "signed for another host",
			id:   "m-1",
			answer: func(c *rawClient, ch wireMsg) {
				// Claims the right host but signed for another: the hub
				// checks the signature over its own name.
				c.answer(wireMsg{Type: "response", Nonce: ch.Nonce, Host: c.host, Signature: sign(key, "evil.example.com", "m-1", ch.Nonce)})
			},
			want: "bad_signature",
		},
		{
			name: "names another host",
			id:   "m-1",
			answer: func(c *rawClient, ch wireMsg) {
				c.answer(wireMsg{Type: "response", Nonce: ch.Nonce, Host: "evil.example.com", Signature: sign(key, "evil.example.com", "m-1", ch.Nonce)})
			},
			want: "wrong_host",
		},
		{
			name: "unknown machine",
			id:   "m-404",
			answer: func(c *rawClient, ch wireMsg) {
				c.answer(wireMsg{Type: "response", Nonce: ch.Nonce, Host: c.host, Signature: sign(key, c.host, "m-404", ch.Nonce)})
			},
			want: "unknown_machine",
		},
		{
			name: "id of another endpoint",
			id:   "elsewhere-1",
			answer: func(c *rawClient, ch wireMsg) {
				// Whatever the key: the id is never taken here.
				c.answer(wireMsg{Type: "response", Nonce: ch.Nonce, Host: c.host, Signature: sign(key, c.host, "elsewhere-1", ch.Nonce)})
			},
			want: "wrong_endpoint",
		},
		{
			name: "text garbage",
			id:   "m-1",
			answer: func(c *rawClient, _ wireMsg) {
				c.send(websocket.MessageText, []byte("\x00\xffnot json at all {"))
			},
			want: "bad_request",
		},
		{
			name: "wrong message type",
			id:   "m-1",
			answer: func(c *rawClient, ch wireMsg) {
				c.answer(wireMsg{Type: "ok", Nonce: ch.Nonce})
			},
			want: "bad_request",
		},
		{
			name: "short signature",
			id:   "m-1",
			answer: func(c *rawClient, ch wireMsg) {
				c.answer(wireMsg{Type: "response", Nonce: ch.Nonce, Host: c.host, Signature: []byte("sig")})
			},
			want: "bad_request",
		},
		{
			name: "binary message",
			id:   "m-1",
			answer: func(c *rawClient, _ wireMsg) {
				c.send(websocket.MessageBinary, []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
			},
			want: "bad_request",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := dialRaw(t, h, tc.id)
			ch := c.mustRead()
			tc.answer(c, ch)
			v := c.mustRead()
			if v.Type != "rejected" || v.Reason != tc.want || v.Message == "" {
				t.Errorf("verdict %+v, want rejected with reason %s and a message", v, tc.want)
			}
			if v.Org != "" {
				t.Errorf("the org %q was told to a daemon that did not prove its key", v.Org)
			}
			_, err := c.read()
			if got := websocket.CloseStatus(err); got != websocket.StatusPolicyViolation {
				t.Errorf("after the verdict: %v (status %v), want a policy-violation close", err, got)
			}
		})
	}
}

// A revoked machine learns its org only after proving its key.
func TestHandshakeRevoked(t *testing.T) {
	t.Parallel()
	h := startHub(t, hubConfig{})
	pub, key := newKey(t)
	h.addMachine("m-1", pub, "acme")
	h.revoke("m-1")
	for _, tc := range []struct {
		name string
		key  ed25519.PrivateKey
		want wireMsg
	}{
		{"with the key", key, wireMsg{Type: "rejected", Reason: "revoked", Org: "acme"}},
		{"without the key", func() ed25519.PrivateKey { _, k := newKey(t); return k }(), wireMsg{Type: "rejected", Reason: "bad_signature"}},
	} {
		c := dialRaw(t, h, "m-1")
		ch := c.mustRead()
		c.answer(wireMsg{Type: "response", Nonce: ch.Nonce, Host: c.host, Signature: sign(tc.key, c.host, "m-1", ch.Nonce)})
		got := c.mustRead()
		got.Message = ""
		if diff := cmp.Diff(got, tc.want); diff != "" {
			t.Errorf("%s: verdict (-got +want):\n%s", tc.name, diff)
		}
	}
}

// The hub drops a daemon that never answers, and one that sends a huge
// message, without waiting for it.
func TestHandshakeAbuse(t *testing.T) {
	t.Parallel()
	h := startHub(t, hubConfig{handshakeTimeout: 200 * time.Millisecond})
	pub, _ := newKey(t)
	h.addMachine("m-1", pub, "acme")
	t.Cleanup(func() { // after the subtests
		if n := h.auths.Load(); n != 0 {
			t.Errorf("Authenticate called %d times for daemons that never answered", n)
		}
		// On a timeout the websocket library closes the connection as the
		// handshake's deadline passes, a moment before the hub's handler
		// sees its read fail and counts the refusal: a daemon can see the
		// close first. Wait for the counts to settle.
		deadline := time.Now().Add(5 * time.Second)
		for refusedFor(h.acc, "timeout") < 21 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		for _, r := range h.acc.Refused() {
			if want := map[string]int64{"timeout": 21}[r.Reason]; r.Count != want {
				t.Errorf("refused %d for %s, want %d (1 + 20 silent daemons)", r.Count, r.Reason, want)
			}
		}
	})

	t.Run("silent", func(t *testing.T) {
		t.Parallel()
		c := dialRaw(t, h, "m-1")
		c.mustRead() // the challenge, never answered
		start := time.Now()
		if _, err := c.read(); err == nil {
			t.Fatal("the hub sent more instead of dropping a silent daemon")
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("dropped after %v, want about the 200 ms handshake timeout", took)
		}
	})
	t.Run("huge message", func(t *testing.T) {
		t.Parallel()
		h := startHub(t, hubConfig{}) // the default handshake timeout: writing 1 MiB can take a while
		c := dialRaw(t, h, "m-1")
		c.mustRead()
		huge := strings.Repeat("A", 1<<20)
		// The hub may close while the message is still being written.
		_ = c.ws.Write(t.Context(), websocket.MessageText, []byte(`{"type":"response","nonce":"`+huge+`"}`))
		_, err := c.read()
		if got := websocket.CloseStatus(err); got != websocket.StatusMessageTooBig {
			t.Errorf("after a 1 MiB message: %v (status %v), want message-too-big", err, got)
		}
		if n := refusedFor(h.acc, "bad_request"); n != 1 {
			t.Errorf("refused %d as bad_request, want 1", n)
		}
	})
	t.Run("many slow daemons", func(t *testing.T) {
		t.Parallel()
		// Each is dropped on its own deadline; none blocks the others.
		var cs []*rawClient
		for range 20 {
			c := dialRaw(t, h, "m-1")
			c.mustRead()
			cs = append(cs, c)
		}
		for _, c := range cs {
			if _, err := c.read(); err == nil {
				t.Fatal("a silent daemon got a verdict")
			}
		}
	})
}

// Requests that are not a tunnel are answered with plain HTTP errors.
func TestAcceptorBadRequests(t *testing.T) {
	t.Parallel()
	h := startHub(t, hubConfig{})
	for _, tc := range []struct {
		name   string
		method string
		header http.Header
		want   int
	}{
		{"post", http.MethodPost, http.Header{transport.HeaderMachine: {"m-1"}, "Sec-Websocket-Protocol": {transport.Subprotocol}}, http.StatusMethodNotAllowed},
		{"no machine id", http.MethodGet, http.Header{"Sec-Websocket-Protocol": {transport.Subprotocol}}, http.StatusBadRequest},
		{"bad machine id", http.MethodGet, http.Header{transport.HeaderMachine: {"../../etc"}, "Sec-Websocket-Protocol": {transport.Subprotocol}}, http.StatusBadRequest},
		{"no subprotocol", http.MethodGet, http.Header{transport.HeaderMachine: {"m-1"}}, http.StatusBadRequest},
		{"not a websocket", http.MethodGet, http.Header{transport.HeaderMachine: {"m-1"}, "Sec-Websocket-Protocol": {transport.Subprotocol}}, http.StatusUpgradeRequired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), tc.method, h.url()+transport.Path, nil)
			req.Header = tc.header
			resp, err := h.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
}

// waitDown waits until the registry no longer holds id.
func waitDown(t *testing.T, h *testHub, id string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		if _, ok := h.reg.Get(id); !ok {
			return
		}
		select {
		case <-h.downs:
		case <-deadline:
			t.Fatalf("%s still registered", id)
		}
	}
}
