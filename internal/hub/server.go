package hub

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/devdepot-ai/agentd/internal/rpcerr"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"github.com/devdepot-ai/agentd/internal/bufpool"
	"github.com/devdepot-ai/agentd/internal/hub/activitylog"
	"github.com/devdepot-ai/agentd/internal/hub/conns"
	"github.com/devdepot-ai/agentd/internal/hub/console"
	"github.com/devdepot-ai/agentd/internal/hub/fleet"
	"github.com/devdepot-ai/agentd/internal/hub/machinetop"
	"github.com/devdepot-ai/agentd/internal/hub/pairing"
	"github.com/devdepot-ai/agentd/internal/hub/preview"
	"github.com/devdepot-ai/agentd/internal/hub/replica"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/wire"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	"github.com/devdepot-ai/agentd/transport"
)

// Options configures a Server. Zero fields get defaults in New.
type Options struct {
	// Store holds orgs, tokens, codes, machines and activity. Required.
	Store store.Store
	// PublicHost is the host[:port] daemons dial, which their tunnel
	// signatures name. Default: each request's Host header.
	PublicHost string
	// Logger receives the hub's logs. Default: a no-op logger.
	Logger *zap.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// ActivityKeepPerOrg bounds stored activity per org (default 100,000).
	ActivityKeepPerOrg int
	// ActivityKeepBytesPerOrg bounds the bytes of stored activity per org
	// (default 256 MiB): the oldest records go first.
	ActivityKeepBytesPerOrg int64
	// ActivityLimits caps what a daemon's account may store (defaults in
	// ActivityLimits' fields).
	ActivityLimits activitylog.Limits
	// Heartbeat is how often live tunnels are re-checked against
	// revocation and their last-seen time stored (default 30 s).
	Heartbeat time.Duration
	// Sandboxes configures the container sandboxes the hub runs (none
	// without a Driver).
	Sandboxes sandboxes.Options
	// Secrets resolves the secret references of agent runs (--secret
	// NAME=ref:PATH). Nil: runs that name secrets are refused.
	Secrets SecretResolver
	// TrustedProxies are the reverse proxies (load balancers) in front of
	// the hub whose X-Forwarded-For is believed for a pairing client's
	// address, which the pairing rate limit counts by. Default none: the
	// connection's address.
	TrustedProxies []netip.Prefix
	// Replica, when set, makes the hub one of several replicas sharing
	// Store (see package replica): it registers, heartbeats and records
	// which machines' tunnels it holds. Its Store, Now and Logger default
	// to the hub's. Nil: the only hub on its store.
	Replica *replica.Options
	// PublicURL is the hub's URL as people and machines reach it, shown
	// by the web console in the pairing commands. Default: each request's
	// scheme and Host.
	PublicURL string
	// MaxConnsPerClient caps the connections one client address (an IPv6
	// /64) holds open on the hub's port; the excess is closed at once.
	// Trusted proxies are not capped. Default conns.DefaultMaxConnsPerClient;
	// negative: no cap.
	MaxConnsPerClient int
	// MaxConnsPerSandbox caps the connections one sandbox (its cgroup)
	// holds open on the sandboxes' socket: its tunnel and its egress.
	// Default conns.DefaultMaxConnsPerSandbox; negative: no cap.
	MaxConnsPerSandbox int
	// RecordTerminalInput stores what people type into the console's
	// terminals in activity (agenthub serve --record-terminal-input);
	// the terminal page says so.
	RecordTerminalInput bool
	// PreviewURL is the base URL the preview server is reached at
	// (ServePreview's listener, agenthub serve --preview-listen), which
	// agentctl port expose prints URLs under. Empty: previews are off.
	PreviewURL string
	// PreviewDomainURL, set, serves previews at <token>.DOMAIN on the
	// hub's own port too (agenthub serve --preview-domain), DOMAIN being
	// its host, one origin per exposure; the URLs port expose prints take
	// its scheme and port. No request whose Host is under DOMAIN reaches
	// the console or the API (PublicURL's host must not be under it).
	PreviewDomainURL string
}

// Server is agenthub: HTTP (pairing, tunnels, health, metrics) and gRPC
// (the hub's own services and every agentd.v1 call, routed) on one port.
type Server struct {
	opts     Options
	log      *zap.Logger
	store    store.Store
	auth     *authenticator
	gate     *tokenGate // the token checked at a call's headers
	pairing  *pairing.Service
	fleet    *fleet.Fleet // the tunnels: this hub's, and for a replica the others'
	acceptor *transport.Acceptor
	grpc     *grpc.Server
	health   *health.Server
	activity *activitylog.Recorder
	mux      *http.ServeMux

	sandboxes *sandboxes.Manager // nil: no sandboxes
	preview   *preview.Server    // served by ServePreview

	calls, pairs atomic.Int64
	conns        *conns.Limiter // connections open, on the port and the sandboxes' socket

	life life // background work and closing
}

// life is a Server's lifecycle: the context of its background work, and
// its closing, which waits for every Serve.
type life struct {
	ctx    context.Context // lives until Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// mu guards closed and serves.Add: a Serve that starts after Close
	// began refuses, so Close's serves.Wait cannot miss one.
	mu      sync.Mutex
	closed  bool
	closing chan struct{} // closed when Close begins: Serve stops
	serves  sync.WaitGroup
	once    sync.Once
}

// relayWriteBuffer is the gRPC server's write buffer (see New).
const relayWriteBuffer = 256 << 10

// ErrServerClosed is returned by Serve called after Close.
var ErrServerClosed = errors.New("hub: server closed")

// New builds a Server on opts.Store.
func New(ctx context.Context, opts Options) (*Server, error) {
	if opts.Store == nil {
		return nil, errors.New("hub: no store")
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ActivityKeepPerOrg <= 0 {
		opts.ActivityKeepPerOrg = 100000
	}
	if opts.ActivityKeepBytesPerOrg <= 0 {
		opts.ActivityKeepBytesPerOrg = 256 << 20
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 30 * time.Second
	}
	if opts.MaxConnsPerClient == 0 {
		opts.MaxConnsPerClient = conns.DefaultMaxConnsPerClient
	}
	if opts.MaxConnsPerSandbox == 0 {
		opts.MaxConnsPerSandbox = conns.DefaultMaxConnsPerSandbox
	}
	s := &Server{opts: opts, log: opts.Logger, store: opts.Store, life: life{closing: make(chan struct{})}, conns: conns.NewLimiter(conns.TotalCap())}
	s.life.ctx, s.life.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.auth = &authenticator{store: opts.Store, now: opts.Now, touched: map[string]time.Time{}}
	s.gate = newTokenGate(s.auth, opts.Now)
	var err error
	s.activity, err = activitylog.New(activitylog.Options{Store: opts.Store, Now: opts.Now, Logger: s.log, Limits: opts.ActivityLimits,
		Conn:  func(id string) (grpc.ClientConnInterface, bool) { return s.fleet.Get(id) },
		Drain: func(id string) { s.fleet.Drain(id) }, Pulse: func() { s.fleet.ActivityStored() }})
	if err != nil {
		s.Close()
		return nil, err
	}
	s.pairing, err = pairing.New(ctx, pairing.Options{Store: opts.Store, Now: opts.Now})
	if err != nil {
		s.Close()
		return nil, err
	}
	if err := s.sandboxHubID(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.startFleet(ctx); err != nil {
		s.Close()
		return nil, err
	}
	s.acceptor, err = transport.NewAcceptor(transport.AcceptorOptions{
		Authenticate: s.authenticatePublic,
		OnTunnel:     s.fleet.Add,
		Host:         opts.PublicHost,
		Logger:       s.log,
	})
	if err != nil {
		s.Close()
		return nil, err
	}
	s.grpc = grpc.NewServer(
		grpc.ForceServerCodecV2(fleet.Codec()),
		experimental.BufferPool(bufpool.Shared()), // relayed bytes are not cleared first
		// Relayed output leaves in fewer write(2)s; the write buffer is
		// shared (grpc-go's default), so an idle connection holds none.
		grpc.WriteBufferSize(relayWriteBuffer),
		// A caller that stops answering (gone without a FIN, or stuck)
		// is dropped, and its streams with it.
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 15 * time.Second, MaxConnectionIdle: conns.IdleConnTimeout}),
		grpc.MaxHeaderListSize(conns.MaxHeaderBytes),
		grpc.ConnectionTimeout(conns.ClassifyTimeout),
		grpc.InTapHandle(s.tap),
		grpc.UnknownServiceHandler(fleet.Proxy(s.route)),
		grpc.ChainUnaryInterceptor(rpcerr.Unary, s.count, s.auth.unary),
		grpc.ChainStreamInterceptor(rpcerr.Stream, s.countStream, s.auth.stream),
	)
	s.health = health.NewServer()
	healthpb.RegisterHealthServer(s.grpc, s.health)
	hubv1.RegisterAdminServiceServer(s.grpc, &adminService{s: s})
	hubv1.RegisterActivityServiceServer(s.grpc, &activityService{s: s})
	admin := &adminService{s: s}
	envs := &environmentService{s: s, a: admin, top: machinetop.New(machinetop.Options{})}
	hubv1.RegisterEnvironmentServiceServer(s.grpc, envs)
	hubv1.RegisterAgentServiceServer(s.grpc, &agentService{s: s, a: admin})
	if s.preview, err = s.newPreview(); err != nil {
		s.Close()
		return nil, err
	}
	previews := s.newExposures()
	hubv1.RegisterPreviewServiceServer(s.grpc, previews)

	s.mux = http.NewServeMux()
	s.mux.Handle("GET /v1/tunnel", s.acceptor)
	s.mux.Handle("GET "+transport.StreamPath, s.fleet.Streams())
	s.mux.HandleFunc("POST "+wire.PairPath, s.handlePair)
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "ok")
	})
	s.mux.HandleFunc("GET /metrics", s.ownerOnly(s.handleMetrics))
	web, err := console.New(console.Options{Backend: &consoleBackend{s: s, admin: admin, envs: envs, exposures: previews}, Sessions: opts.Store,
		PublicURL: opts.PublicURL, Logger: s.log.Named("console"), Now: opts.Now, RecordTerminalInput: opts.RecordTerminalInput})
	if err != nil {
		s.Close()
		return nil, err
	}
	s.mux.Handle(console.Prefix, web)
	s.life.wg.Go(func() { <-s.life.closing; web.Close() }) // its usage sampler
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, console.Prefix, http.StatusSeeOther)
	})

	if opts.Sandboxes.Driver != nil {
		if err := s.startSandboxes(ctx); err != nil {
			s.Close()
			return nil, err
		}
	}
	s.life.wg.Add(1)
	go s.heartbeat()
	return s, nil
}

// authenticatePublic is authenticateMachine for the public port, which
// takes no sandbox id: a sandbox's key read inside it must not let a
// daemon elsewhere open that sandbox's tunnel and answer its calls.
func (s *Server) authenticatePublic(ctx context.Context, id string) (ed25519.PublicKey, string, error) {
	if isSandboxID(id) {
		return nil, "", fmt.Errorf("sandbox %s opens its tunnel only through its sandbox's own socket, never the hub's public port: %w", id, transport.ErrWrongEndpoint)
	}
	return s.authenticateMachine(ctx, id)
}

// Handler serves HTTP and, for HTTP/2 requests of content type
// application/grpc, gRPC.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := s.preview.HostToken(r.Host); ok {
			// A preview's origin: its server, whatever the path.
			s.preview.ServeHTTP(w, r)
			return
		}
		if r.URL.Path == preview.AuthPagePath && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			// The sign-in hop of a preview under the preview domain.
			s.preview.ServeAuthPage(w, r)
			return
		}
		if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
			if !s.gate.admitHTTP(w, r) {
				return
			}
			s.grpc.ServeHTTP(w, r)
			return
		}
		s.mux.ServeHTTP(w, r)
	})
}

// Serve serves on lis (TLS when tlsConfig is set; plaintext HTTP/1.1 and
// HTTP/2 otherwise) until ctx is cancelled or Close is called, then shuts
// down and closes the server (see Close): tunnels are closed with a
// going-away status so daemons reconnect to the next hub. gRPC clients are
// served by the native gRPC transport, everything else by net/http (see
// conns.Splitter). Serve is called once; after Close it returns ErrServerClosed.
func (s *Server) Serve(ctx context.Context, lis net.Listener, tlsConfig *tls.Config) error {
	s.life.mu.Lock()
	if s.life.closed {
		s.life.mu.Unlock()
		_ = lis.Close()
		return ErrServerClosed
	}
	s.life.serves.Add(1)
	s.life.mu.Unlock()
	err := s.serve(ctx, lis, tlsConfig)
	s.life.serves.Done()
	s.Close()
	return err
}

func (s *Server) serve(ctx context.Context, lis net.Listener, tlsConfig *tls.Config) error {
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    conns.MaxHeaderBytes,
		IdleTimeout:       conns.IdleConnTimeout,
		ErrorLog:          zap.NewStdLog(s.log.Named("http")),
	}
	hs.Protocols = new(http.Protocols)
	hs.Protocols.SetHTTP1(true)
	hs.Protocols.SetHTTP2(true)
	hs.Protocols.SetUnencryptedHTTP2(true)
	if tlsConfig != nil {
		hs.TLSConfig = tlsConfig.Clone()
	}
	lis = s.conns.Limit(lis, s.opts.MaxConnsPerClient, conns.TCPClientKey(s.opts.TrustedProxies))
	sp := conns.NewSplitter(lis, tlsConfig, s.log.Named("listener"))
	errc := make(chan error, 3)
	go func() { errc <- sp.Run() }()
	go func() { errc <- ignoreClosed(hs.Serve(sp.HTTP())) }()
	go func() { errc <- ignoreClosed(s.grpc.Serve(sp.GRPC())) }()
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
	case <-s.life.closing:
	}
	_ = sp.Close()
	s.health.Shutdown()
	_ = s.acceptor.Close()
	s.fleet.CloseAll()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	s.grpc.Stop()
	sp.Wait()
	for range 2 {
		if e := <-errc; err == nil {
			err = e
		}
	}
	return err
}

// ignoreClosed turns the errors that mean "shut down as asked" into nil.
func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Close stops the server and releases everything New started: it makes a
// running Serve shut down and waits for it, closes every tunnel, and stops
// the hub's background work (heartbeat, activity collectors, the
// sandboxes' socket, reaper and validations). Serve calls it when it
// stops; Close may also be called without Serve, more than once, and
// concurrently with Serve: every call returns once the server is closed.
// The store is the caller's: Close leaves it open.
func (s *Server) Close() {
	s.life.once.Do(s.close)
}

// close runs once; on a server New gave up on half way, the parts it did
// not get to are nil.
func (s *Server) close() {
	s.life.mu.Lock()
	s.life.closed = true
	close(s.life.closing)
	s.life.mu.Unlock()
	s.life.serves.Wait()

	s.life.cancel()
	if s.activity != nil {
		s.activity.Close()
	}
	if s.acceptor != nil {
		_ = s.acceptor.Close()
	}
	if s.sandboxes != nil {
		s.sandboxes.Close()
	}
	if s.fleet != nil {
		s.fleet.Close()
	}
	s.life.wg.Wait()
	if s.sandboxes != nil {
		s.sandboxes.Wait()
	}
	if s.activity != nil {
		s.activity.Wait()
	}
}

// authenticateMachine tells the tunnel acceptor a machine's key and org.
func (s *Server) authenticateMachine(ctx context.Context, id string) (ed25519.PublicKey, string, error) {
	m, err := s.store.Machine(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, "", transport.ErrUnknownMachine
	}
	if err != nil {
		return nil, "", err
	}
	org, err := s.store.Org(ctx, m.OrgID)
	if err != nil {
		return nil, "", err
	}
	if !m.RevokedAt.IsZero() {
		return m.PublicKey, org.Name, transport.ErrRevoked
	}
	return m.PublicKey, org.Name, nil
}

// startFleet builds the tunnel registry and, for a replica, registers
// it, with the events of the other replicas (if the store carries them).
func (s *Server) startFleet(ctx context.Context) error {
	o := fleet.Options{Store: s.store, Logger: s.log, Now: s.opts.Now, OnUp: s.activity.MachineUp, OnDown: s.activity.MachineDown,
		Admit: s.admitForwarded, MaxHeaderBytes: conns.MaxHeaderBytes, HandshakeTimeout: conns.ClassifyTimeout}
	if s.opts.Replica != nil {
		r := *s.opts.Replica
		if s.opts.Sandboxes.Driver != nil {
			// Other replicas find the replica that drives a sandbox (its
			// row's hub) by this prefix.
			if r.ID == "" {
				r.ID = store.NewID("r-")
			}
			r.ID = s.opts.Sandboxes.HubID + replicaHubSep + r.ID
		}
		o.Replica = &r
		o.Broadcaster, _ = s.store.(fleet.Broadcaster)
	}
	f, err := fleet.New(ctx, o)
	if err != nil {
		return err
	}
	s.fleet = f
	f.OnRevoke(func(id string) {
		if s.sandboxes != nil && isSandboxID(id) {
			s.sandboxes.RemoveGone(id) // if it is this replica's and its row is gone
		}
	})
	f.OnSandboxAsked(func(id string) {
		if s.sandboxes != nil && isSandboxID(id) {
			s.sandboxes.Asked(id) // if it is this replica's
		}
	})
	f.OnActivity(s.activity.Notify)
	return nil
}

// admitForwarded guards a call another replica forwarded to a sandbox
// this replica holds: this replica's egress rules guard it, whichever
// replica the call came in on.
func (s *Server) admitForwarded(ctx context.Context, id string) (func(error) error, error) {
	if s.sandboxes == nil || !isSandboxID(id) {
		return nil, nil
	}
	if err := s.sandboxes.EgressRefusalFor(ctx, id); err != nil {
		return nil, err
	}
	return s.sandboxes.Enter(ctx, id), nil
}

// ServeInternal serves calls other replicas forward, on lis (the address
// the replica registered, Options.Replica.Addr), until ctx ends or the
// server closes. Only for a replica.
func (s *Server) ServeInternal(ctx context.Context, lis net.Listener) error {
	return s.fleet.ServeInternal(ctx, lis)
}

// ReplicaID is the hub's ID in the replica registry ("" if it is not a
// replica).
func (s *Server) ReplicaID() string { return s.fleet.ReplicaID() }

// heartbeat stores last-seen times of live tunnels and closes those whose
// machine was revoked (by another replica, or directly in the store).
func (s *Server) heartbeat() {
	defer s.life.wg.Done()
	t := time.NewTicker(s.opts.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-s.life.ctx.Done():
			return
		case <-t.C:
		}
		now := s.opts.Now()
		s.fleet.CheckTunnels(s.life.ctx, now)
		if _, err := s.store.PruneActivity(s.life.ctx, s.opts.ActivityKeepPerOrg, s.opts.ActivityKeepBytesPerOrg, time.Time{}); err != nil && s.life.ctx.Err() == nil {
			s.log.Warn("pruning activity", zap.Error(err))
		}
		if _, err := s.store.DeleteExpiredConsole(s.life.ctx, now); err != nil && s.life.ctx.Err() == nil {
			s.log.Warn("deleting expired console sessions", zap.Error(err))
		}
	}
}

func (s *Server) count(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	s.calls.Add(1)
	return h(ctx, req)
}

func (s *Server) countStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	s.calls.Add(1)
	return h(srv, ss)
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "# HELP agenthub_tunnels Machines with a live tunnel.\n# TYPE agenthub_tunnels gauge\nagenthub_tunnels %d\n", s.fleet.Len())
	fmt.Fprintf(w, "# HELP agenthub_grpc_calls_total gRPC calls received.\n# TYPE agenthub_grpc_calls_total counter\nagenthub_grpc_calls_total %d\n", s.calls.Load())
	fmt.Fprintf(w, "# HELP agenthub_pair_requests_total Pairing requests received.\n# TYPE agenthub_pair_requests_total counter\nagenthub_pair_requests_total %d\n", s.pairs.Load())
	fmt.Fprintf(w, "# HELP agenthub_byte_streams_total Forwarded connections whose daemon carried them on a byte stream of their own.\n# TYPE agenthub_byte_streams_total counter\nagenthub_byte_streams_total %d\n", s.fleet.Streams().Taken())
	fmt.Fprintf(w, "# HELP agenthub_connections_refused_total Connections closed as they were accepted: over a client's or the hub's cap.\n# TYPE agenthub_connections_refused_total counter\nagenthub_connections_refused_total %d\n", s.conns.Refused())
	fmt.Fprintf(w, "# HELP agenthub_tunnel_handshakes_refused_total Tunnel handshakes refused (machines' and sandboxes'), by reason.\n# TYPE agenthub_tunnel_handshakes_refused_total counter\n")
	refused := s.acceptor.Refused()
	if s.sandboxes != nil {
		for i, r := range s.sandboxes.Refused() {
			refused[i].Count += r.Count // the same reasons in the same order
		}
	}
	for _, r := range refused {
		fmt.Fprintf(w, "agenthub_tunnel_handshakes_refused_total{reason=%q} %d\n", r.Reason, r.Count)
	}
	if s.sandboxes != nil {
		if err := s.sandboxes.WriteMetrics(r.Context(), w); err != nil {
			s.log.Warn("metrics", zap.Error(err))
		}
	}
}
