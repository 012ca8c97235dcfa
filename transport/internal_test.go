package transport

import (
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestTunnelURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"https://hub.example.com", "wss://hub.example.com/v1/tunnel"},
		{"https://hub.example.com/", "wss://hub.example.com/v1/tunnel"},
		{"wss://hub.example.com:8443/agentd", "wss://hub.example.com:8443/agentd/v1/tunnel"},
		{"https://hub.example.com/v1/tunnel", "wss://hub.example.com/v1/tunnel"},
		{"http://127.0.0.1:8080", "ws://127.0.0.1:8080/v1/tunnel"},
		{"ws://localhost:8080", "ws://localhost:8080/v1/tunnel"},
		{"http://[::1]:8080", "ws://[::1]:8080/v1/tunnel"},
		{"  https://hub.example.com  ", "wss://hub.example.com/v1/tunnel"},
		{"unix:///run/agentd/hub.sock", "ws://" + UnixHost + "/v1/tunnel"},
	} {
		u, err := tunnelURL(tc.in)
		if err != nil {
			t.Errorf("tunnelURL(%q): %v", tc.in, err)
			continue
		}
		if got := u.String(); got != tc.want {
			t.Errorf("tunnelURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{"http://example.com", "ws://10.1.2.3", "ftp://x", "hub.example.com", "https://", "https://a:b@hub", "://", "unix://host/x.sock", "unix:relative.sock"} {
		if _, err := tunnelURL(bad); err == nil {
			t.Errorf("tunnelURL(%q): no error", bad)
		}
	}
}

func TestCanonicalHost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"Hub.Example.COM", "hub.example.com"},
		{"hub.example.com:443", "hub.example.com"},
		{"hub.example.com:80", "hub.example.com"},
		{"hub.example.com:8443", "hub.example.com:8443"},
		{"127.0.0.1:34567", "127.0.0.1:34567"},
		{"[::1]:443", "[::1]"},
		{"[::1]:8443", "[::1]:8443"},
		{"[::1]", "[::1]"},
	} {
		if got := canonicalHost(tc.in); got != tc.want {
			t.Errorf("canonicalHost(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	b := Backoff{}.withDefaults()
	top := func(n int64) int64 { return n - 1 }
	var got []time.Duration
	for i := range 10 {
		got = append(got, (b.delay(i, top) + 1).Round(time.Microsecond))
	}
	// 1 s × 1.6^n, capped at 30 s.
	want := []time.Duration{1_000_000, 1_600_000, 2_560_000, 4_096_000, 6_553_600, 10_485_760, 16_777_216, 26_843_546, 30_000_000, 30_000_000}
	for i := range want {
		want[i] *= time.Microsecond
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("backoff ceilings (-got +want):\n%s", diff)
	}
	if d := b.delay(3, func(int64) int64 { return 0 }); d != 0 {
		t.Errorf("full jitter reaches 0, got %v", d)
	}
	if d := b.delay(1<<20, top); d != 30*time.Second-1 {
		t.Errorf("huge failure count: %v", d)
	}
	for _, r := range []func(int64) int64{func(int64) int64 { return 0 }, top} {
		if d := b.rejectedDelay(r); d < 150*time.Second || d >= 5*time.Minute {
			t.Errorf("rejected delay %v, want in [2.5 min, 5 min)", d)
		}
	}
	if d := b.delay(0, func(int64) int64 { return -5 }); d != 0 {
		t.Errorf("bad rand clamps to 0, got %v", d)
	}
}

// fakeNetConn returns a fixed read result.
type fakeNetConn struct {
	net.Conn
	n   int
	err error
}

func (f *fakeNetConn) Read(p []byte) (int, error) {
	copy(p, "masked garbage")
	return f.n, f.err
}

// coder/websocket can return a still-masked partial payload with an error;
// the conn must never pass those bytes on.
func TestConnReadDropsBytesOnError(t *testing.T) {
	t.Parallel()
	boom := errors.New("connection reset")
	c := &conn{Conn: &fakeNetConn{n: 5, err: boom}, done: make(chan struct{})}
	n, err := c.Read(make([]byte, 16))
	if n != 0 || !errors.Is(err, boom) {
		t.Errorf("Read = %d, %v; want 0, %v", n, err, boom)
	}
	select {
	case <-c.done:
	default:
		t.Error("a broken read did not end the conn")
	}
	if !errors.Is(c.cause(), boom) {
		t.Errorf("cause %v, want %v", c.cause(), boom)
	}

	ok := &conn{Conn: &fakeNetConn{n: 5}, done: make(chan struct{})}
	if n, err := ok.Read(make([]byte, 16)); n != 5 || err != nil {
		t.Errorf("good read = %d, %v", n, err)
	}
	eof := &conn{Conn: &fakeNetConn{err: io.EOF}, done: make(chan struct{})}
	if n, err := eof.Read(make([]byte, 16)); n != 0 || err != io.EOF {
		t.Errorf("EOF read = %d, %v", n, err)
	}
}

func TestRejectedError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  *RejectedError
		is   error
		text string
	}{
		{&RejectedError{Reason: ReasonRevoked, Org: "acme"}, ErrRevoked, "this machine was removed from org acme; run agentd pair again"},
		{&RejectedError{Reason: ReasonUnknownMachine, MachineID: "m-1"}, ErrUnknownMachine, "the hub does not know this machine (id m-1); run agentd pair again"},
		{&RejectedError{Reason: ReasonWrongHost, Message: "use the public URL"}, ErrWrongHost, "the hub refused the tunnel (wrong_host): use the public URL"},
		{&RejectedError{Reason: "from_the_future"}, nil, "the hub refused the tunnel (from_the_future)"},
	} {
		if got := tc.err.Error(); got != tc.text {
			t.Errorf("Error() = %q, want %q", got, tc.text)
		}
		if tc.is != nil && !errors.Is(tc.err, tc.is) {
			t.Errorf("%v is not %v", tc.err, tc.is)
		}
		if errors.Is(tc.err, ErrBadSignature) {
			t.Errorf("%v matches ErrBadSignature", tc.err)
		}
	}
}

func TestValidMachineID(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]bool{
		"m-1": true, "0b9f2a7e-1c3d-4e5f-8a9b-0c1d2e3f4a5b": true, "a.b_c": true,
		"": false, "m 1": false, "m/1": false, "m|1": false, "é": false, strings.Repeat("a", 129): false,
	} {
		if got := ValidMachineID(id); got != want {
			t.Errorf("ValidMachineID(%q) = %v", id, got)
		}
	}
}

func TestClean(t *testing.T) {
	t.Parallel()
	if got := clean("ok\x1b[31m\nred\xff", 100); got != "ok[31mred" {
		t.Errorf("clean = %q", got)
	}
	if got := clean(strings.Repeat("é", 10), 5); got != "éé…" {
		t.Errorf("clean cut a rune: %q", got)
	}
}

// Handshake messages from the network never panic the decoder, and what it
// accepts is well formed.
func FuzzDecodeMessage(f *testing.F) {
	f.Add([]byte(`{"type":"response","nonce":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","host":"h","signature":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=="}`))
	f.Add([]byte(`{"type":"challenge","nonce":"x","expires":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"type":"rejected","reason":"revoked","org":"acme"}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, want := range [][]string{{msgResponse}, {msgChallenge}, {msgOK, msgRejected}} {
			m, err := decodeMessage(data, want...)
			if err != nil {
				continue
			}
			if m.Type == msgResponse && len(m.Signature) != 64 {
				t.Fatalf("accepted a response with a %d-byte signature", len(m.Signature))
			}
		}
	})
}

func TestAcceptorHost(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                            "",
		"Hub.Example.com":             "hub.example.com",
		"hub.example.com:443":         "hub.example.com",
		"https://hub.example.com/x":   "hub.example.com",
		"http://hub.internal:8080":    "hub.internal:8080",
		"https://hub.example.com:443": "hub.example.com",
	} {
		a, err := NewAcceptor(AcceptorOptions{
			Host:         in,
			Authenticate: func(context.Context, string) (ed25519.PublicKey, string, error) { return nil, "", nil },
			OnTunnel:     func(string, net.Conn, string) {},
		})
		if err != nil {
			t.Errorf("NewAcceptor(Host %q): %v", in, err)
			continue
		}
		if a.host != want {
			t.Errorf("Host %q: acceptor expects %q, want %q", in, a.host, want)
		}
		a.Close()
	}
	if _, err := NewAcceptor(AcceptorOptions{Host: "https://"}); err == nil {
		t.Error("NewAcceptor without Authenticate: no error")
	}
}
