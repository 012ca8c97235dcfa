package transport_test

import (
	"context"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/transport"
)

// The hub calls Health.Check on a daemon through the tunnel: plain ws, TLS
// with a CA made here, and TLS through an HTTP CONNECT proxy.
func TestTunnelEndToEnd(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		tls   bool
		proxy bool
	}{
		{name: "ws"},
		{name: "wss", tls: true},
		{name: "wss via CONNECT proxy", tls: true, proxy: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := hubConfig{}
			var pool *x509.CertPool
			if tc.tls {
				pool, cfg.tls = testCA(t)
			}
			h := startHub(t, cfg)
			pub, key := newKey(t)
			h.addMachine("m-1", pub, "acme")
			opts := daemonOptions(t, h.url(), "m-1", key)
			opts.RootCAs = pool
			var proxy *connectProxy
			if tc.proxy {
				proxy = startConnectProxy(t)
				pu, _ := url.Parse(proxy.srv.URL)
				opts.Proxy = http.ProxyURL(pu)
			}
			d := startDaemon(t, opts)

			if err := h.health(t.Context(), "m-1"); err != nil {
				t.Fatal(err)
			}
			st := waitStatus(t, d.tun, "connected", isConnected)
			if st.ConnectedSince.IsZero() || st.Err != nil || st.MachineID != "m-1" {
				t.Errorf("status %+v: want connected since a time, no error, machine m-1", st)
			}
			wantScheme := "ws://"
			if tc.tls {
				wantScheme = "wss://"
			}
			if !strings.HasPrefix(st.Hub, wantScheme) || !strings.HasSuffix(st.Hub, "/v1/tunnel") {
				t.Errorf("status hub %q: want %s…/v1/tunnel", st.Hub, wantScheme)
			}
			if got := h.reg.Len(); got != 1 {
				t.Errorf("registry holds %d tunnels, want 1", got)
			}
			if tun := h.reg.Tunnels(); len(tun) != 1 || tun[0].MachineID != "m-1" || tun[0].Remote == "" {
				t.Errorf("registry tunnels %+v", tun)
			}
			if proxy != nil && proxy.connects.Load() == 0 {
				t.Error("the proxy saw no CONNECT: the tunnel did not go through it")
			}

			// Bulk data arrives intact (the Read fix must never yield bytes
			// that are not the peer's).
			cc, _ := h.reg.Get("m-1")
			s, err := pull(t.Context(), cc, 64) // 2 MiB
			if err != nil {
				t.Fatal(err)
			}
			n, err := drain(s, true)
			if err != nil || n != 64*chunkSize {
				t.Fatalf("pulled %d bytes, err %v; want %d", n, err, 64*chunkSize)
			}
		})
	}
}

// A daemon reaches a hub over a unix socket (a sandbox's tunnel) with a
// unix:// URL, naming and signing for UnixHost; a hub expecting another host
// refuses it.
func TestTunnelUnixSocket(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "hub.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	h := startHub(t, hubConfig{listener: lis, host: transport.UnixHost})
	pub, key := newKey(t)
	h.addMachine("sb-1", pub, "acme")
	d := startDaemon(t, daemonOptions(t, "unix://"+sock, "sb-1", key))
	if err := h.health(t.Context(), "sb-1"); err != nil {
		t.Fatal(err)
	}
	st := waitStatus(t, d.tun, "connected", isConnected)
	if want := "ws://" + transport.UnixHost + "/v1/tunnel"; st.Hub != want {
		t.Errorf("status hub %q, want %q", st.Hub, want)
	}

	// The same daemon against a unix socket whose hub is another host: the
	// signature names UnixHost, so the hub refuses it.
	sock2 := filepath.Join(t.TempDir(), "hub.sock")
	lis2, err := net.Listen("unix", sock2)
	if err != nil {
		t.Fatal(err)
	}
	h2 := startHub(t, hubConfig{listener: lis2, host: "hub.example.com"})
	h2.addMachine("sb-1", pub, "acme")
	d2 := startDaemon(t, daemonOptions(t, "unix://"+sock2, "sb-1", key))
	st = waitStatus(t, d2.tun, "rejected", func(s transport.Status) bool { return s.State == transport.StateRejected })
	if !errors.Is(st.Err, transport.ErrWrongHost) {
		t.Errorf("err %v, want ErrWrongHost", st.Err)
	}
}

// A daemon that does not trust the hub's certificate never authenticates.
func TestTunnelUnknownCA(t *testing.T) {
	t.Parallel()
	_, srvTLS := testCA(t)
	h := startHub(t, hubConfig{tls: srvTLS})
	pub, key := newKey(t)
	h.addMachine("m-1", pub, "acme")
	d := startDaemon(t, daemonOptions(t, h.url(), "m-1", key)) // no RootCAs

	st := waitStatus(t, d.tun, "waiting after a TLS error", func(s transport.Status) bool {
		return s.State == transport.StateWaiting && s.Err != nil
	})
	if !strings.Contains(st.Err.Error(), "certificate") {
		t.Errorf("error %q: want a certificate error", st.Err)
	}
	if n := h.auths.Load(); n != 0 {
		t.Errorf("the hub authenticated %d times, want 0", n)
	}
}

// Every refusal reaches the daemon with the right reason, shows in its
// status, and makes it wait (slowly for a refusal that retrying cannot fix)
// instead of hammering the hub.
func TestTunnelRejected(t *testing.T) {
	t.Parallel()
	otherPub, _ := newKey(t)
	for _, tc := range []struct {
		name      string
		register  func(h *testHub, pub []byte) // what the hub knows
		hubHost   string
		hubStep   time.Duration // the hub's clock moves this much on every reading
		wantState transport.State
		wantErr   error
		wantText  string
		wantWaits []time.Duration // with maxRand
	}{
		{
			name:      "unknown machine",
			register:  func(*testHub, []byte) {},
			wantState: transport.StateRejected,
			wantErr:   transport.ErrUnknownMachine,
			wantText:  "the hub does not know this machine (id m-1); run agentd pair again",
			wantWaits: []time.Duration{5*time.Minute - 1, 5*time.Minute - 1},
		},
		{
			name: "revoked",
			register: func(h *testHub, pub []byte) {
				h.addMachine("m-1", pub, "acme")
				h.revoke("m-1")
			},
			wantState: transport.StateRejected,
			wantErr:   transport.ErrRevoked,
			wantText:  "this machine was removed from org acme; run agentd pair again",
			wantWaits: []time.Duration{5*time.Minute - 1, 5*time.Minute - 1},
		},
		{
			name:      "wrong key",
			register:  func(h *testHub, _ []byte) { h.addMachine("m-1", otherPub, "acme") },
			wantState: transport.StateRejected,
			wantErr:   transport.ErrBadSignature,
			wantText:  "not the key that was paired); run agentd pair again",
			wantWaits: []time.Duration{5*time.Minute - 1, 5*time.Minute - 1},
		},
		{
			name:      "wrong host",
			register:  func(h *testHub, pub []byte) { h.addMachine("m-1", pub, "acme") },
			hubHost:   "hub.example.com",
			wantState: transport.StateRejected,
			wantErr:   transport.ErrWrongHost,
			wantText:  `this hub is "hub.example.com"`,
			wantWaits: []time.Duration{5*time.Minute - 1, 5*time.Minute - 1},
		},
		{
			name:      "expired nonce",
			register:  func(h *testHub, pub []byte) { h.addMachine("m-1", pub, "acme") },
			hubStep:   61 * time.Second, // the answer is read 61 s after the challenge
			wantState: transport.StateWaiting,
			wantErr:   transport.ErrExpired,
			wantText:  "expired",
			// Not the machine's fault: the normal backoff, growing ×1.6.
			wantWaits: []time.Duration{time.Second - 1, 1600*time.Millisecond - 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hubClock := newFakeClock()
			hubClock.step = tc.hubStep
			h := startHub(t, hubConfig{host: tc.hubHost, clock: hubClock})
			pub, key := newKey(t)
			tc.register(h, pub)

			clock := newFakeClock()
			opts := daemonOptions(t, h.url(), "m-1", key)
			opts.Backoff = transport.Backoff{} // the defaults
			opts.Clock, opts.Rand = clock, maxRand
			d := startDaemon(t, opts)

			for i, want := range tc.wantWaits {
				w := clock.nextWait(t)
				if w.d != want {
					t.Errorf("attempt %d: waits %v, want %v", i+1, w.d, want)
				}
				// The tunnel is parked on the fake clock: no attempt in between.
				if n := h.requests.Load(); n != int64(i+1) {
					t.Errorf("after attempt %d the hub saw %d attempts", i+1, n)
				}
				st := d.tun.Status()
				if st.State != tc.wantState {
					t.Errorf("state %q, want %q", st.State, tc.wantState)
				}
				if !errors.Is(st.Err, tc.wantErr) {
					t.Errorf("status error %v: want errors.Is %v", st.Err, tc.wantErr)
				}
				if st.Err == nil || !strings.Contains(st.Err.Error(), tc.wantText) {
					t.Errorf("status error %q: want it to say %q", st.Err, tc.wantText)
				}
				var rej *transport.RejectedError
				if errors.As(st.Err, &rej) && tc.wantErr == transport.ErrRevoked && rej.Org != "acme" {
					t.Errorf("rejection org %q, want acme", rej.Org)
				}
				if st.Failures != i+1 || !st.NextAttempt.Equal(clock.peek().Add(want)) {
					t.Errorf("status failures %d next %v: want %d, now+%v", st.Failures, st.NextAttempt, i+1, want)
				}
				w.fire <- time.Time{}
			}
			clock.nextWait(t) // parked again; cleanup closes the tunnel
			if n := h.reg.Len(); n != 0 {
				t.Errorf("registry holds %d tunnels after refusals", n)
			}
		})
	}
}

// The hub restarts: its tunnels close, a new hub comes up on the same
// address, the daemon reconnects and calls work again.
func TestTunnelHubRestart(t *testing.T) {
	t.Parallel()
	h1 := startHub(t, hubConfig{})
	pub, key := newKey(t)
	h1.addMachine("m-1", pub, "acme")
	d := startDaemon(t, daemonOptions(t, h1.url(), "m-1", key))
	if err := h1.health(t.Context(), "m-1"); err != nil {
		t.Fatal(err)
	}
	addr := h1.srv.Listener.Addr().String()

	h1.stop()
	st := waitStatus(t, d.tun, "down", func(s transport.Status) bool { return s.State != transport.StateConnected })
	if st.Err == nil {
		t.Errorf("status %+v: want the reason the tunnel ended", st)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	h2 := startHub(t, hubConfig{listener: ln})
	h2.addMachine("m-1", pub, "acme")
	if err := h2.health(t.Context(), "m-1"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, d.tun, "connected", isConnected)
}

// Revoking a machine closes its live tunnel within a second; the daemon
// then learns it was removed from its org and says so.
func TestTunnelRevoke(t *testing.T) {
	t.Parallel()
	h := startHub(t, hubConfig{})
	d := connectedDaemon(t, h)
	waitStatus(t, d.tun, "connected", isConnected)

	h.revoke("m-1")
	start := time.Now()
	if !h.reg.Close("m-1") {
		t.Fatal("Registry.Close: no tunnel for m-1")
	}
	waitStatus(t, d.tun, "down", func(s transport.Status) bool { return s.State != transport.StateConnected })
	if took := time.Since(start); took > time.Second {
		t.Errorf("the daemon's tunnel closed %v after revoke, want ≤ 1 s", took)
	}
	select {
	case id := <-h.downs:
		if id != "m-1" {
			t.Errorf("OnDown(%q), want m-1", id)
		}
	case <-time.After(time.Second):
		t.Error("OnDown not called within 1 s of revoke")
	}
	st := waitStatus(t, d.tun, "rejected", func(s transport.Status) bool { return s.State == transport.StateRejected })
	if !errors.Is(st.Err, transport.ErrRevoked) || !strings.Contains(st.Err.Error(), "removed from org acme") {
		t.Errorf("status error %v: want revoked from org acme", st.Err)
	}
	if _, ok := h.reg.Get("m-1"); ok {
		t.Error("the registry still holds the revoked machine")
	}
}

// TestTunnelRevokeLearnedAtOnce: a tunnel the hub closes because the machine
// was revoked is re-asked at once, not after the backoff, so the daemon
// learns it was revoked (and can stop the org's work) within moments.
func TestTunnelRevokeLearnedAtOnce(t *testing.T) {
	t.Parallel()
	h := startHub(t, hubConfig{})
	pub, key := newKey(t)
	h.addMachine("m-1", pub, "acme")
	opts := daemonOptions(t, h.url(), "m-1", key)
	opts.Backoff = transport.Backoff{Initial: time.Hour, Max: time.Hour, Rejected: time.Hour}
	d := startDaemon(t, opts)
	if err := h.health(t.Context(), "m-1"); err != nil {
		t.Fatal(err)
	}
	h.revoke("m-1")
	if !h.reg.Close("m-1") {
		t.Fatal("Registry.Close: no tunnel for m-1")
	}
	st := waitStatus(t, d.tun, "rejected", func(s transport.Status) bool { return s.State == transport.StateRejected })
	if !errors.Is(st.Err, transport.ErrRevoked) {
		t.Errorf("status error %v: want revoked", st.Err)
	}
}

// A machine that reconnects while its old tunnel still looks alive
// replaces it: the old one is closed, the machine is never reported down.
func TestTunnelReplace(t *testing.T) {
	t.Parallel()
	h := startHub(t, hubConfig{})
	pub, key := newKey(t)
	h.addMachine("m-1", pub, "acme")

	clockA := newFakeClock() // A never reconnects unless told
	optsA := daemonOptions(t, h.url(), "m-1", key)
	optsA.Clock = clockA
	a := startDaemon(t, optsA)
	a.health.SetServingStatus("a", healthpb.HealthCheckResponse_SERVING)
	if err := h.health(t.Context(), "m-1", "a"); err != nil {
		t.Fatal(err)
	}

	b := startDaemon(t, daemonOptions(t, h.url(), "m-1", key))
	b.health.SetServingStatus("b", healthpb.HealthCheckResponse_SERVING)
	waitStatus(t, b.tun, "connected", isConnected)
	st := waitStatus(t, a.tun, "replaced", func(s transport.Status) bool { return s.State == transport.StateWaiting })
	if !strings.Contains(st.Err.Error(), "replaced by a newer tunnel") {
		t.Errorf("A's status error %q: want it to say it was replaced", st.Err)
	}
	if err := h.health(t.Context(), "m-1", "b"); err != nil {
		t.Fatalf("calls go to the newer tunnel: %v", err)
	}
	if n := h.reg.Len(); n != 1 {
		t.Errorf("registry holds %d tunnels, want 1", n)
	}
	select {
	case id := <-h.downs:
		t.Errorf("OnDown(%q) for a machine that is still connected", id)
	default:
	}
}

// A tunnel whose path goes dead (packets vanish, no FIN) is found by the
// daemon's pings and replaced by a new one.
func TestTunnelDeadConnection(t *testing.T) {
	t.Parallel()
	h := startHub(t, hubConfig{})
	pub, key := newKey(t)
	h.addMachine("m-1", pub, "acme")
	fwd := startForwarder(t, h.srv.Listener.Addr().String())
	opts := daemonOptions(t, fwd.url(), "m-1", key)
	opts.PingInterval = 100 * time.Millisecond
	d := startDaemon(t, opts)
	if err := h.health(t.Context(), "m-1"); err != nil {
		t.Fatal(err)
	}
	first := waitStatus(t, d.tun, "connected", isConnected)
	<-h.ups

	fwd.relay.freeze()
	st := waitStatus(t, d.tun, "down", func(s transport.Status) bool { return s.State != transport.StateConnected })
	if st.Err == nil || !strings.Contains(st.Err.Error(), "did not answer a ping") {
		t.Errorf("status error %v: want the missed ping", st.Err)
	}
	st = waitStatus(t, d.tun, "connected again", func(s transport.Status) bool {
		return s.State == transport.StateConnected && s.ConnectedSince.After(first.ConnectedSince)
	})
	<-h.ups // the hub has replaced the dead tunnel (it has not noticed it is dead)
	if err := h.health(t.Context(), "m-1"); err != nil {
		t.Fatalf("after reconnecting: %v", err)
	}
}

// Closing the daemon's server closes the tunnel with going-away: the hub
// marks the machine down at once.
func TestTunnelDaemonShutdown(t *testing.T) {
	t.Parallel()
	h := startHub(t, hubConfig{})
	d := connectedDaemon(t, h)
	start := time.Now()
	d.srv.GracefulStop()
	select {
	case <-h.downs:
		if took := time.Since(start); took > time.Second {
			t.Errorf("hub saw the machine go down after %v", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the hub did not see the machine go down")
	}
	if st := d.tun.Status(); st.State != transport.StateClosed {
		t.Errorf("state %q after the server stopped, want closed", st.State)
	}
}

func TestListenOptions(t *testing.T) {
	t.Parallel()
	_, key := newKey(t)
	for _, tc := range []struct {
		name, hub, id string
		key           []byte
		want          string // error substring; "" = ok
	}{
		{"https", "https://hub.example.com", "m-1", key, ""},
		{"ws loopback", "ws://127.0.0.1:8080", "m-1", key, ""},
		{"ws remote", "ws://hub.example.com", "m-1", key, "only allowed to a loopback hub"},
		{"http remote", "http://10.0.0.1:8080", "m-1", key, "only allowed to a loopback hub"},
		{"ftp", "ftp://hub.example.com", "m-1", key, "want wss://"},
		{"no host", "https://", "m-1", key, "no host"},
		{"credentials", "https://u:p@hub.example.com", "m-1", key, "credentials"},
		{"bad id", "https://hub.example.com", "m 1/..", key, "machine id"},
		{"empty id", "https://hub.example.com", "", key, "machine id"},
		{"no key", "https://hub.example.com", "m-1", nil, "Ed25519"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tun, err := transport.Listen(transport.Options{HubURL: tc.hub, MachineID: tc.id, Key: tc.key})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Listen: %v", err)
				}
				tun.Close()
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Listen error %v, want %q", err, tc.want)
			}
		})
	}
}

// A machine revoked (or paired again) in the store, without a call to
// Registry.Close, loses its tunnel at its next heartbeat.
func TestTunnelRecheckedOnHeartbeat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(h *testHub)
		want   error
	}{
		{"revoked", func(h *testHub) { h.revoke("m-1") }, transport.ErrRevoked},
		{"paired again", func(h *testHub) {
			other, _ := newKey(t)
			h.addMachine("m-1", other, "acme")
		}, transport.ErrBadSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := startHub(t, hubConfig{})
			pub, key := newKey(t)
			h.addMachine("m-1", pub, "acme")
			opts := daemonOptions(t, h.url(), "m-1", key)
			opts.PingInterval = 50 * time.Millisecond
			d := startDaemon(t, opts)
			if err := h.health(t.Context(), "m-1"); err != nil {
				t.Fatal(err)
			}
			waitStatus(t, d.tun, "connected", isConnected)

			tc.change(h)
			start := time.Now()
			waitStatus(t, d.tun, "down", func(s transport.Status) bool { return s.State != transport.StateConnected })
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("tunnel closed %v after the change, want about one ping interval", took)
			}
			st := waitStatus(t, d.tun, "rejected", func(s transport.Status) bool { return s.State == transport.StateRejected })
			if !errors.Is(st.Err, tc.want) {
				t.Errorf("status error %v, want %v", st.Err, tc.want)
			}
		})
	}
}

// Reconnects back off while tunnels keep dying young, and start from the
// initial wait again after a tunnel that stayed up a minute.
func TestTunnelBackoffResets(t *testing.T) {
	t.Parallel()
	h := startHub(t, hubConfig{})
	pub, key := newKey(t)
	h.addMachine("m-1", pub, "acme")
	clock := newFakeClock()
	opts := daemonOptions(t, h.url(), "m-1", key)
	opts.Backoff = transport.Backoff{} // the defaults
	opts.Clock, opts.Rand = clock, maxRand
	d := startDaemon(t, opts)

	for i, tc := range []struct {
		up   time.Duration // how long the tunnel stays up
		want time.Duration // the wait before reconnecting
	}{
		{up: 61 * time.Second, want: time.Second - 1},
		{up: 0, want: 1600*time.Millisecond - 1},
		{up: 10 * time.Second, want: 2560*time.Millisecond - 1},
		{up: time.Minute, want: time.Second - 1},
	} {
		waitStatus(t, d.tun, "connected", isConnected)
		<-h.ups
		clock.advance(tc.up)
		h.drop("m-1")
		w := clock.nextWait(t)
		if w.d != tc.want {
			t.Errorf("tunnel %d, up %v: waits %v, want %v", i+1, tc.up, w.d, tc.want)
		}
		if st := d.tun.Status(); st.State != transport.StateWaiting {
			t.Errorf("state %q while waiting, want waiting", st.State)
		}
		w.fire <- time.Time{}
	}
	waitStatus(t, d.tun, "connected", isConnected)
}

// Drain takes a machine offline at once (the daemon said it is shutting
// down) while calls already on its tunnel go on; CloseAll still closes it.
func TestRegistryDrain(t *testing.T) {
	t.Parallel()
	h := startHub(t, hubConfig{})
	pub, key := newKey(t)
	h.addMachine("m-1", pub, "acme")
	d := startDaemon(t, daemonOptions(t, h.url(), "m-1", key))
	d.health.SetServingStatus("svc", healthpb.HealthCheckResponse_SERVING)
	cc, err := h.reg.Wait(t.Context(), "m-1")
	if err != nil {
		t.Fatal(err)
	}
	<-h.ups
	watch, err := healthpb.NewHealthClient(cc).Watch(t.Context(), &healthpb.HealthCheckRequest{Service: "svc"})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := watch.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first watch update: %v, %v", r, err)
	}

	h.reg.Drain("m-1")
	select {
	case id := <-h.downs:
		if id != "m-1" {
			t.Errorf("OnDown(%q), want m-1", id)
		}
	default:
		t.Error("Drain did not call OnDown")
	}
	if _, ok := h.reg.Get("m-1"); ok {
		t.Error("a drained machine is still returned by Get")
	}
	// The call that was running goes on over the same tunnel.
	d.health.SetServingStatus("svc", healthpb.HealthCheckResponse_NOT_SERVING)
	if r, err := watch.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("watch update after Drain: %v, %v", r, err)
	}
	if st := d.tun.Status(); st.State != transport.StateConnected {
		t.Errorf("daemon's tunnel %q after Drain, want still connected", st.State)
	}
	h.reg.CloseAll()
	waitStatus(t, d.tun, "tunnel closed by the hub", func(s transport.Status) bool { return s.State != transport.StateConnected })
}

// A MachineConn kept after its tunnel closed fails new calls at once with
// UNAVAILABLE (it does not wait for a tunnel that will not come back), and
// the machine's next tunnel gets a MachineConn of its own that works.
func TestMachineConnAfterClose(t *testing.T) {
	t.Parallel()
	h := startHub(t, hubConfig{})
	d := connectedDaemon(t, h)
	old, ok := h.reg.Get("m-1")
	if !ok {
		t.Fatal("m-1 is not registered")
	}
	<-h.ups
	h.reg.Close("m-1")
	if id := <-h.downs; id != "m-1" {
		t.Fatalf("OnDown(%q), want m-1", id)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	t0 := time.Now()
	_, err := healthpb.NewHealthClient(old).Check(ctx, &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.Unavailable || time.Since(t0) > 5*time.Second {
		t.Errorf("a call on the closed tunnel's MachineConn: %v after %s, want UNAVAILABLE at once", err, time.Since(t0))
	}
	// The daemon reconnects (a revoke-less close): its new tunnel works.
	waitStatus(t, d.tun, "connected again", isConnected)
	if err := h.health(t.Context(), "m-1"); err != nil {
		t.Fatal(err)
	}
}
