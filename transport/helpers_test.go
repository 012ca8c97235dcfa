package transport_test

import (
	"bufio"
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/protobuf/proto"

	"github.com/devdepot-ai/agentd/transport"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testLogger logs warnings and errors only: a tunnel test logs a lot.
func testLogger(t testing.TB) *zap.Logger {
	return zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
}

// ---- the hub ----

type hubMachine struct {
	pub     ed25519.PublicKey
	org     string
	revoked bool
}

type hubConfig struct {
	tls              *tls.Config // nil: plain http
	host             string      // AcceptorOptions.Host
	clock            transport.Clock
	handshakeTimeout time.Duration
	listener         net.Listener // nil: a new loopback port
	logger           *zap.Logger  // the acceptor's; nil: warnings and errors to the test log
}

// testHub is a hub as agenthub wires it: an Acceptor on GET /v1/tunnel
// feeding a Registry, with machines in memory.
type testHub struct {
	t        testing.TB
	srv      *httptest.Server
	acc      *transport.Acceptor
	reg      *transport.Registry
	requests atomic.Int64 // upgrade requests seen
	auths    atomic.Int64 // Authenticate calls
	downs    chan string  // OnDown
	ups      chan string  // OnUp

	mu       sync.Mutex
	machines map[string]hubMachine
	conns    map[string]net.Conn // each machine's latest tunnel, for drop
	stopOnce sync.Once
}

func startHub(t testing.TB, cfg hubConfig) *testHub {
	t.Helper()
	h := &testHub{t: t, machines: map[string]hubMachine{}, conns: map[string]net.Conn{}, downs: make(chan string, 100), ups: make(chan string, 10000)}
	reg, err := transport.NewRegistry(transport.RegistryOptions{
		Logger: testLogger(t),
		OnUp:   func(id string) { h.ups <- id },
		OnDown: func(id string) {
			select {
			case h.downs <- id:
			default:
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.reg = reg
	acc, err := transport.NewAcceptor(transport.AcceptorOptions{
		Authenticate: h.authenticate,
		OnTunnel: func(id string, conn net.Conn, remote string) {
			h.mu.Lock()
			h.conns[id] = conn
			h.mu.Unlock()
			h.reg.Add(id, conn, remote)
		},
		Host:             cfg.host,
		Clock:            cfg.clock,
		HandshakeTimeout: cfg.handshakeTimeout,
		Logger:           cmp.Or(cfg.logger, testLogger(t)),
	})
	if err != nil {
		t.Fatal(err)
	}
	h.acc = acc
	mux := http.NewServeMux()
	mux.Handle(transport.Path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.requests.Add(1)
		acc.ServeHTTP(w, r)
	}))
	h.srv = httptest.NewUnstartedServer(mux)
	if cfg.listener != nil {
		h.srv.Listener.Close()
		h.srv.Listener = cfg.listener
	}
	if cfg.tls != nil {
		h.srv.TLS = cfg.tls
		h.srv.StartTLS()
	} else {
		h.srv.Start()
	}
	t.Cleanup(h.stop)
	return h
}

// stop shuts the hub down the way agenthub does: listener, acceptor, tunnels.
func (h *testHub) stop() {
	h.stopOnce.Do(func() {
		h.srv.Close()
		h.acc.Close()
		h.reg.CloseAll()
	})
}

func (h *testHub) url() string { return h.srv.URL }

// drop closes a machine's tunnel as a broken connection would end it (not
// as a revoke does, which the daemon answers at once).
func (h *testHub) drop(id string) {
	h.mu.Lock()
	c := h.conns[id]
	h.mu.Unlock()
	if c == nil {
		h.t.Fatalf("no tunnel of %s to drop", id)
	}
	c.Close()
}

func (h *testHub) addMachine(id string, pub ed25519.PublicKey, org string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.machines[id] = hubMachine{pub: pub, org: org}
}

func (h *testHub) revoke(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.machines[id]
	m.revoked = true
	h.machines[id] = m
}

func (h *testHub) authenticate(_ context.Context, id string) (ed25519.PublicKey, string, error) {
	h.auths.Add(1)
	if strings.HasPrefix(id, "elsewhere-") {
		// Like a sandbox's id on the hub's public port: never taken here.
		return nil, "", fmt.Errorf("this id connects only through another endpoint: %w", transport.ErrWrongEndpoint)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	m, ok := h.machines[id]
	switch {
	case !ok:
		return nil, "", transport.ErrUnknownMachine
	case m.revoked:
		return m.pub, m.org, transport.ErrRevoked
	}
	return m.pub, m.org, nil
}

// health calls Health.Check (service "" unless given) on the machine
// through its tunnel.
func (h *testHub) health(ctx context.Context, id string, service ...string) error {
	cc, err := h.reg.Wait(ctx, id)
	if err != nil {
		return fmt.Errorf("machine %s never came up: %w", id, err)
	}
	req := &healthpb.HealthCheckRequest{}
	if len(service) > 0 {
		req.Service = service[0]
	}
	resp, err := healthpb.NewHealthClient(cc).Check(ctx, req)
	if err != nil {
		return err
	}
	if resp.Status != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("health: %v", resp.Status)
	}
	return nil
}

// ---- the daemon ----

type testDaemon struct {
	tun    *transport.Tunnel
	srv    *grpc.Server
	health *health.Server
}

func newKey(t testing.TB) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

// daemonOptions are a daemon's options for hub h with a quick backoff.
func daemonOptions(t testing.TB, hubURL, id string, key ed25519.PrivateKey) transport.Options {
	return transport.Options{
		HubURL:    hubURL,
		MachineID: id,
		Key:       key,
		Logger:    testLogger(t),
		Backoff:   transport.Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond},
	}
}

// newDaemonServer is the daemon's gRPC server as agentd builds it, plus the
// test's raw bytes service.
func newDaemonServer() (*grpc.Server, *health.Server) {
	srv := grpc.NewServer(
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.ForceServerCodec(rawCodec{}),
	)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	srv.RegisterService(&bytesServiceDesc, nil)
	return srv, hs
}

// startDaemon serves a gRPC server (health + bytes) on a Tunnel made of opts.
// connectedDaemon adds machine m-1 of org acme to the hub and starts its
// daemon, returning once a call reaches it through the tunnel.
func connectedDaemon(t testing.TB, h *testHub) *testDaemon {
	t.Helper()
	pub, key := newKey(t)
	h.addMachine("m-1", pub, "acme")
	d := startDaemon(t, daemonOptions(t, h.url(), "m-1", key))
	if err := h.health(t.Context(), "m-1"); err != nil {
		t.Fatal(err)
	}
	return d
}

func startDaemon(t testing.TB, opts transport.Options) *testDaemon {
	t.Helper()
	tun, err := transport.Listen(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv, hs := newDaemonServer()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(tun) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &testDaemon{tun: tun, srv: srv, health: hs}
}

// waitStatus waits for the tunnel's status to satisfy ok, without polling.
func waitStatus(t testing.TB, tun *transport.Tunnel, what string, ok func(transport.Status) bool) transport.Status {
	t.Helper()
	timeout := time.NewTimer(15 * time.Second)
	defer timeout.Stop()
	for {
		ch := tun.Updated()
		st := tun.Status()
		if ok(st) {
			return st
		}
		select {
		case <-ch:
		case <-timeout.C:
			t.Fatalf("timed out waiting for the tunnel to be %s; status %+v", what, st)
		}
	}
}

func isConnected(s transport.Status) bool { return s.State == transport.StateConnected }

// ---- a fake clock ----

type fakeWait struct {
	d    time.Duration
	fire chan time.Time
}

// fakeClock's time moves only when told (step is added on every Now); After
// hands each wait to the test on waits, to fire when it likes.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	step  time.Duration
	waits chan fakeWait
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), waits: make(chan fakeWait, 100)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now
	c.now = c.now.Add(c.step)
	return now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.waits <- fakeWait{d: d, fire: ch}
	return ch
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// peek is Now without the step.
func (c *fakeClock) peek() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// nextWait returns the next wait the tunnel asks for.
func (c *fakeClock) nextWait(t testing.TB) fakeWait {
	t.Helper()
	select {
	case w := <-c.waits:
		return w
	case <-time.After(15 * time.Second):
		t.Fatal("timed out waiting for the tunnel to wait")
		return fakeWait{}
	}
}

// maxRand makes the backoff deterministic: every wait is its ceiling (less 1 ns).
func maxRand(n int64) int64 { return n - 1 }

// ---- TLS with a CA made here ----

// testCA makes a CA and a server certificate for 127.0.0.1 and localhost.
func testCA(t testing.TB) (pool *x509.CertPool, server *tls.Config) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "agentd test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "agenthub test"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(caCert)
	return pool, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

// ---- relays: an HTTP CONNECT proxy and a TCP forwarder that can freeze ----

// relay pipes connection pairs and can freeze them (a black hole: bytes
// are read and dropped), as a dead NAT or load balancer would.
type relay struct {
	mu     sync.Mutex
	pairs  map[*relayPair]struct{}
	closed chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
}

type relayPair struct {
	a, b   net.Conn
	frozen chan struct{}
	once   sync.Once
}

func newRelay() *relay {
	return &relay{pairs: map[*relayPair]struct{}{}, closed: make(chan struct{})}
}

// pipe copies between a and b until either side ends; it owns both.
func (r *relay) pipe(a, b net.Conn) {
	p := &relayPair{a: a, b: b, frozen: make(chan struct{})}
	r.mu.Lock()
	select {
	case <-r.closed:
		r.mu.Unlock()
		a.Close()
		b.Close()
		return
	default:
	}
	r.pairs[p] = struct{}{}
	r.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { r.copy(p, b, a) })
	wg.Go(func() { r.copy(p, a, b) })
	wg.Wait()
	r.mu.Lock()
	delete(r.pairs, p)
	r.mu.Unlock()
}

func (r *relay) copy(p *relayPair, dst, src net.Conn) {
	defer func() {
		p.a.Close()
		p.b.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-p.frozen:
			// Black hole until the relay closes.
			<-r.closed
			return
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// freeze turns every open pair into a black hole; new pairs still flow.
func (r *relay) freeze() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p := range r.pairs {
		p.once.Do(func() { close(p.frozen) })
	}
}

func (r *relay) close() {
	r.once.Do(func() {
		r.mu.Lock()
		close(r.closed)
		for p := range r.pairs {
			p.a.Close()
			p.b.Close()
		}
		r.mu.Unlock()
	})
	r.wg.Wait()
}

// connectProxy is an HTTP proxy that only does CONNECT.
type connectProxy struct {
	srv      *httptest.Server
	relay    *relay
	connects atomic.Int64
}

func startConnectProxy(t testing.TB) *connectProxy {
	p := &connectProxy{relay: newRelay()}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		up, err := net.DialTimeout("tcp", r.Host, 5*time.Second)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		p.connects.Add(1)
		w.WriteHeader(http.StatusOK)
		down, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			up.Close()
			return
		}
		_ = down.SetDeadline(time.Time{})
		var client net.Conn = down
		if brw.Reader.Buffered() > 0 {
			client = &bufferedConn{Conn: down, r: brw.Reader}
		}
		p.relay.wg.Add(1)
		defer p.relay.wg.Done()
		p.relay.pipe(client, up)
	}))
	t.Cleanup(func() {
		p.srv.Close()
		p.relay.close()
	})
	return p
}

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// forwarder accepts TCP connections and relays them to target.
type forwarder struct {
	ln    net.Listener
	relay *relay
	done  chan struct{}
}

func startForwarder(t testing.TB, target string) *forwarder {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{ln: ln, relay: newRelay(), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				c.Close()
				continue
			}
			f.relay.wg.Go(func() { f.relay.pipe(c, up) })
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-f.done
		f.relay.close()
	})
	return f
}

func (f *forwarder) url() string { return "http://" + f.ln.Addr().String() }

// ---- a raw bytes service, to push bulk data through the tunnel ----

// rawCodec passes *[]byte through untouched and protobuf messages as usual,
// so one server serves both the health service and the bytes service.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	switch m := v.(type) {
	case *[]byte:
		return *m, nil
	case proto.Message:
		return proto.Marshal(m)
	}
	return nil, fmt.Errorf("rawCodec: cannot marshal %T", v)
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	switch m := v.(type) {
	case *[]byte:
		*m = append((*m)[:0], data...)
		return nil
	case proto.Message:
		return proto.Unmarshal(data, m)
	}
	return fmt.Errorf("rawCodec: cannot unmarshal into %T", v)
}

func (rawCodec) Name() string { return "proto" }

const chunkSize = 32 << 10

// pattern[k:k+chunkSize] is the chunk at any stream offset ≡ k (mod 251).
var pattern = func() []byte {
	b := make([]byte, chunkSize+251)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}()

var pullDesc = grpc.StreamDesc{StreamName: "Pull", ServerStreams: true}

// bytesServiceDesc: Pull(count) streams count chunks of 32 KiB; byte i of
// the stream is byte(i % 251).
var bytesServiceDesc = grpc.ServiceDesc{
	ServiceName: "transporttest.Bytes",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName:    "Pull",
		ServerStreams: true,
		Handler: func(_ any, stream grpc.ServerStream) error {
			var req []byte
			if err := stream.RecvMsg(&req); err != nil {
				return err
			}
			if len(req) != 8 {
				return errors.New("want an 8-byte count")
			}
			n := binary.BigEndian.Uint64(req)
			var off uint64
			for range n {
				chunk := pattern[off%251 : off%251+chunkSize]
				off += chunkSize
				if err := stream.SendMsg(&chunk); err != nil {
					return err
				}
			}
			return nil
		},
	}},
}

// pull opens Pull(count) on cc.
func pull(ctx context.Context, cc grpc.ClientConnInterface, count int) (grpc.ClientStream, error) {
	s, err := cc.NewStream(ctx, &pullDesc, "/transporttest.Bytes/Pull", grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return nil, err
	}
	req := binary.BigEndian.AppendUint64(nil, uint64(count))
	if err := s.SendMsg(&req); err != nil {
		return nil, err
	}
	if err := s.CloseSend(); err != nil {
		return nil, err
	}
	return s, nil
}

// drain reads a Pull stream to its end, checking every byte when check is set.
func drain(s grpc.ClientStream, check bool) (int64, error) {
	var buf []byte
	var total int64
	for {
		err := s.RecvMsg(&buf)
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
		if check {
			for j, b := range buf {
				if want := byte((uint64(total) + uint64(j)) % 251); b != want {
					return total, fmt.Errorf("byte %d is %d, want %d", total+int64(j), b, want)
				}
			}
		}
		total += int64(len(buf))
	}
}
