package transport_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/devdepot-ai/agentd/transport"
)

// dialFrom is dialRaw from the local address ip, so that the hub sees
// refusals from several addresses.
func dialFrom(t *testing.T, h *testHub, id string, ip net.IP) (*rawClient, error) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}
	client := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, h.url()+transport.Path, &websocket.DialOptions{
		HTTPClient:   client,
		HTTPHeader:   http.Header{transport.HeaderMachine: {id}},
		Subprotocols: []string{transport.Subprotocol},
	})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { ws.CloseNow() })
	u, _ := url.Parse(h.url())
	return &rawClient{t: t, ws: ws, host: u.Host}, nil
}

// An unauthenticated client cannot fill the hub's log: hundreds of bad
// handshakes from a dozen addresses make a bounded number of lines (the
// first refusal of up to 10 addresses, then one summary per interval),
// and the metric counts every one.
func TestRefusalsLogSampled(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.InfoLevel)
	written := make(chan zapcore.Entry, 1000)
	log := zap.New(core, zap.Hooks(func(e zapcore.Entry) error {
		written <- e
		return nil
	}))
	clock := newFakeClock()
	h := startHub(t, hubConfig{clock: clock, logger: log})
	pub, _ := newKey(t)
	h.addMachine("m-1", pub, "acme")
	_, stranger := newKey(t) // not m-1's key

	// 12 addresses where the system has them (127/8 is loopback on Linux).
	ips := []net.IP{net.IPv4(127, 0, 0, 1)}
	probe := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	if c, err := probe.DialContext(t.Context(), "tcp", h.srv.Listener.Addr().String()); err == nil {
		c.Close()
		for i := range 11 {
			ips = append(ips, net.IPv4(127, 0, 0, byte(2+i)))
		}
	} else {
		t.Logf("one source address only: %v", err)
	}

	const rounds = 25
	response := func(id string) func(host string, ch wireMsg) []byte {
		return func(host string, ch wireMsg) []byte {
			b, _ := json.Marshal(wireMsg{Type: "response", Nonce: ch.Nonce, Host: host, Signature: sign(stranger, host, id, ch.Nonce)})
			return b
		}
	}
	kinds := []struct {
		id     string
		answer func(host string, ch wireMsg) []byte
		reason string
	}{
		{"m-1", response("m-1"), "bad_signature"},
		{"m-404", response("m-404"), "unknown_machine"},
		{"m-1", func(string, wireMsg) []byte { return []byte("{not json") }, "bad_request"},
	}
	// Every address at once, each sending rounds × one of each kind.
	var wg sync.WaitGroup
	for _, ip := range ips {
		wg.Go(func() {
			for range rounds {
				for _, k := range kinds {
					c, err := dialFrom(t, h, k.id, ip)
					if err != nil {
						t.Error(err)
						return
					}
					ch, err := c.read()
					if err != nil {
						t.Error(err)
						return
					}
					if err := c.ws.Write(t.Context(), websocket.MessageText, k.answer(c.host, ch)); err != nil {
						t.Error(err)
						return
					}
					// The hub counts a refusal before it sends the verdict.
					if v, err := c.read(); err != nil || v.Reason != k.reason {
						t.Errorf("verdict %+v (%v), want reason %s", v, err, k.reason)
					}
					c.ws.CloseNow()
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	each := int64(rounds * len(ips))
	want := []transport.RefusalCount{
		{Reason: "bad_signature", Count: each},
		{Reason: "replayed"},
		{Reason: "unknown_machine", Count: each},
		{Reason: "revoked"},
		{Reason: "expired"},
		{Reason: "wrong_host"},
		{Reason: "bad_request", Count: each},
		{Reason: "unavailable"},
		{Reason: "wrong_endpoint"},
		{Reason: "timeout"},
		{Reason: "disconnected"},
	}
	if diff := cmp.Diff(h.acc.Refused(), want); diff != "" {
		t.Errorf("Refused() (-got +want):\n%s", diff)
	}
	// So far: the first refusal of each address, 10 at most.
	wantLines := min(len(ips), 10)
	if got := logs.FilterMessage("tunnel refused").Len(); got != wantLines || logs.Len() != wantLines {
		t.Errorf("%d lines (%d tunnel refused) after %d refusals from %d addresses, want %d: %v", logs.Len(), got, 3*each, len(ips), wantLines, messages(logs))
	}

	// The window ends: one summary.
	w := clock.nextWait(t)
	if w.d != time.Minute {
		t.Errorf("summary after %v, want the default 1m", w.d)
	}
	clock.advance(w.d)
	skipLogged(t, written, wantLines)
	w.fire <- time.Time{}
	e := next(t, written)
	addrs := "1 address"
	if len(ips) > 1 {
		addrs = fmt.Sprintf("%d addresses", len(ips))
	}
	wantMsg := fmt.Sprintf("tunnel handshakes refused in the last 1m: %d (bad signature %d, unknown machine %d, bad request %d) from %s", 3*each, each, each, each, addrs)
	if e.Message != wantMsg || e.Level != zapcore.WarnLevel {
		t.Errorf("summary %v %q,\nwant    warn %q", e.Level, e.Message, wantMsg)
	}

	// A refusal in the next window is logged in full again, and alone
	// it needs no summary: Close logs nothing more.
	c, err := dialFrom(t, h, "m-404", ips[0])
	if err != nil {
		t.Fatal(err)
	}
	c.answer(wireMsg{Type: "response", Nonce: c.mustRead().Nonce, Host: c.host})
	c.mustRead()
	c.ws.CloseNow()
	if e := next(t, written); e.Message != "tunnel refused" {
		t.Errorf("next window: %q, want tunnel refused", e.Message)
	}
	clock.nextWait(t) // the new window's timer, never fired
	h.stop()
	if n := logs.Len(); n != wantLines+2 {
		t.Errorf("%d lines in all, want %d: %v", n, wantLines+2, messages(logs))
	}
}

// A flood that stops before its window ends is summed up when the
// acceptor closes, over the time it lasted.
func TestRefusalsSummaryAtClose(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.InfoLevel)
	clock := newFakeClock()
	h := startHub(t, hubConfig{clock: clock, logger: zap.New(core)})
	for range 5 {
		c := dialRaw(t, h, "m-404")
		c.answer(wireMsg{Type: "response", Nonce: c.mustRead().Nonce, Host: c.host, Signature: make([]byte, ed25519.SignatureSize)})
		c.mustRead()
		c.ws.CloseNow()
	}
	clock.advance(20 * time.Second)
	h.stop()
	want := []string{"tunnel refused", "tunnel handshakes refused in the last 20s: 5 (unknown machine 5) from 1 address"}
	if diff := cmp.Diff(messages(logs), want); diff != "" {
		t.Errorf("logs (-got +want):\n%s", diff)
	}
	if e := logs.All()[1]; e.Level != zapcore.InfoLevel || e.ContextMap()["unknown_machine"] != int64(5) {
		t.Errorf("summary %v %v, want info with unknown_machine=5", e.Level, e.ContextMap())
	}
}

// refusedFor is the acceptor's count of refusals for reason.
func refusedFor(a *transport.Acceptor, reason string) int64 {
	for _, r := range a.Refused() {
		if r.Reason == reason {
			return r.Count
		}
	}
	return -1
}

func messages(logs *observer.ObservedLogs) []string {
	var out []string
	for _, e := range logs.All() {
		out = append(out, e.Message)
	}
	return out
}

// next returns the next entry logged.
func next(t *testing.T, written <-chan zapcore.Entry) zapcore.Entry {
	t.Helper()
	select {
	case e := <-written:
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("nothing logged")
		return zapcore.Entry{}
	}
}

// skipLogged takes the n entries already logged.
func skipLogged(t *testing.T, written <-chan zapcore.Entry, n int) {
	t.Helper()
	for range n {
		next(t, written)
	}
}
