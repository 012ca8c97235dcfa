package agentd

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/devdepot-ai/agentd/internal/rpcerr"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/internal/activity"
	"github.com/devdepot-ai/agentd/internal/bufpool"
	"github.com/devdepot-ai/agentd/internal/config"
	"github.com/devdepot-ai/agentd/internal/version"
	"github.com/devdepot-ai/agentd/internal/wire"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
	"github.com/devdepot-ai/agentd/runner"
)

// Modes the daemon runs in.
const (
	ModeMachine = "machine" // a user's own machine: runs as the user, unsandboxed
	ModeSandbox = "sandbox" // inside a container sandbox (uid 1000, read-only root)
)

// Options configures a Server. Zero fields get defaults in New.
type Options struct {
	// Workspace is the directory relative paths resolve against and commands
	// start in by default. Default: the user's home, or /workspace in sandbox mode.
	Workspace string
	// Mode is ModeMachine (default) or ModeSandbox.
	Mode string
	// StateDir holds snapshots, the audit log and the socket. Default:
	// $AGENTD_STATE_DIR, else ~/.local/state/agentd.
	StateDir string
	// Shell runs command strings (`Shell -c CMD`). Default: $SHELL, else
	// /bin/sh (%ComSpec% on Windows).
	Shell string
	// Env is the base environment of the commands the agent runs. Default:
	// on a machine, the user's login environment, resolved once from
	// `$SHELL -l`; in a sandbox, the daemon's own, which is the image's
	// (its ENV as the engine set it, as `docker exec` gives it: a login
	// shell's profile would reset PATH and lose what the image adds).
	Env []string
	// SecretsDir, when set, is where a hub delivers variables for every
	// later command: FileService.Write of NAME there sets NAME (a valid
	// secret name) in the daemon's memory, never on disk; files on disk
	// there are ignored. Default: SandboxSecretsDir in sandbox mode, none
	// otherwise.
	SecretsDir string
	// Python is the interpreter for PythonService: a path, or a name looked
	// up on Env's PATH. Default "python3".
	Python string
	// Token, when set, is the bearer token every call must present in the
	// "authorization" metadata ("Bearer TOKEN").
	Token string
	// Reflection registers the gRPC reflection service (local socket only).
	Reflection bool
	// Logger receives the daemon's logs. Default: a no-op logger.
	Logger *zap.Logger
	// Version is reported by SystemService.Info. Default: the build's version.
	Version string
	// Environment and Image, in sandbox mode, name the hub environment the
	// sandbox belongs to and the image (pinned) it runs; Info reports them.
	Environment, Image string
	// Platform, in a gVisor sandbox, is gVisor's platform as the hub's
	// engine runs it (the hub says; the sentry does not tell); Info
	// reports it.
	Platform string
	// Tunnel, when set, is the tunnel to the hub that SystemService.Info
	// reports on (set by Run); forwarded connections open byte streams
	// to the hub through it when the hub offers them.
	Tunnel *tunnelInfo
	// NoByteStreams makes the daemon ignore the hub's offers of byte
	// streams and carry every forwarded connection in messages, as
	// daemons before them did (tests of that older path; a hub behind
	// something that cannot carry an HTTP upgrade).
	NoByteStreams bool
}

// maxRecvMsg bounds one request message: Python code may be 10 MiB, and
// the services' own checks should be what refuses more.
const maxRecvMsg = 11 << 20

// connBufferSize is gRPC's read and write buffer per connection.
const connBufferSize = 256 << 10

// Server is the agentd gRPC server with every agentd.v1 service registered.
type Server struct {
	opts     Options
	log      *zap.Logger
	grpc     *grpc.Server
	health   *health.Server
	procs    *processService
	files    *fileService
	secrets  *secretStore // nil without SecretsDir
	python   *pythonService
	snaps    *snapshotService
	activity *activity.Log
	system   *systemService
	probes   sync.WaitGroup // start-up probes, bounded in time
	started  time.Time

	// served is set by Serve: Close then records the stop for the hub.
	served atomic.Bool
	// closing is set when Close begins: Serve refuses to start after it.
	closing   atomic.Bool
	closeOnce sync.Once
	// logClosed is closed by Close once the audit log is closed and
	// lastSeq holds its last record's sequence number: activity watchers
	// end when they have sent it (see endWatches).
	logClosed chan struct{}
	lastSeq   uint64
}

// ErrServerClosed is returned by Serve called after Close.
var ErrServerClosed = errors.New("agentd: server closed")

// New builds a Server, filling defaults into opts.
func New(ctx context.Context, opts Options) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Version == "" {
		opts.Version = version.Version
	}
	switch opts.Mode {
	case "":
		opts.Mode = ModeMachine
	case ModeMachine, ModeSandbox:
	default:
		return nil, fmt.Errorf("mode %q: want %q or %q", opts.Mode, ModeMachine, ModeSandbox)
	}
	if opts.Shell == "" {
		opts.Shell = runner.DefaultShell()
	}
	if opts.SecretsDir == "" && opts.Mode == ModeSandbox {
		opts.SecretsDir = SandboxSecretsDir
	}
	if opts.Python == "" {
		opts.Python = "python3"
	}
	if opts.Workspace == "" {
		ws, err := defaultWorkspace(opts.Mode)
		if err != nil {
			return nil, err
		}
		opts.Workspace = ws
	}
	ws, err := filepath.Abs(opts.Workspace)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	if fi, err := os.Stat(ws); err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("workspace %s is not a directory", ws)
	}
	opts.Workspace = ws
	if opts.StateDir == "" {
		dir, err := config.StateDir()
		if err != nil {
			return nil, err
		}
		opts.StateDir = dir
	}

	if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	if opts.Env == nil && opts.Mode == ModeSandbox {
		opts.Env = os.Environ()
	}
	if opts.Env == nil {
		env, err := runner.LoginEnv(ctx, opts.Shell)
		if err != nil {
			opts.Logger.Warn("no login environment; commands get the daemon's", zap.Error(err))
			env = os.Environ()
		}
		opts.Env = env
	}
	opts.Env = runner.CleanEnv(opts.Env)
	s := &Server{opts: opts, log: opts.Logger, started: time.Now(), logClosed: make(chan struct{})}
	s.activity, err = activity.Open(activity.Options{Dir: opts.StateDir})
	if err != nil {
		return nil, err
	}
	if err := s.newServices(ctx); err != nil {
		s.Close()
		return nil, err
	}

	s.grpc = grpc.NewServer(
		grpc.MaxRecvMsgSize(maxRecvMsg),
		// Bulk output and uploads move in fewer, larger system calls
		// (default 32 KiB each way); a daemon has few connections.
		grpc.WriteBufferSize(connBufferSize),
		grpc.ReadBufferSize(connBufferSize),
		experimental.BufferPool(bufpool.Shared()), // output and forwards are not cleared first
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		// Names each connection's peer for the audit log (caller.go).
		grpc.Creds(newPeerCreds(opts.Token, opts.Logger.Named("peer"))),
		grpc.ChainUnaryInterceptor(rpcerr.Unary, s.authUnary),
		grpc.ChainStreamInterceptor(rpcerr.Stream, s.authStream, s.endWatches),
	)
	s.health = health.NewServer()
	healthpb.RegisterHealthServer(s.grpc, s.health)
	agentdv1.RegisterFileServiceServer(s.grpc, s.files)
	agentdv1.RegisterProcessServiceServer(s.grpc, s.procs)
	s.system = &systemService{s: s}
	agentdv1.RegisterSystemServiceServer(s.grpc, s.system)
	// Learn python3's version now, not on the first Info call: a version
	// manager's shim can take a second to answer.
	s.probes.Add(1)
	go func() {
		defer s.probes.Done()
		s.system.pythonVersion(context.WithoutCancel(ctx))
	}()
	agentdv1.RegisterPythonServiceServer(s.grpc, s.python)
	agentdv1.RegisterSnapshotServiceServer(s.grpc, s.snaps)
	agentdv1.RegisterActivityServiceServer(s.grpc, &activityService{log: s.activity})
	agentdv1.RegisterPortServiceServer(s.grpc, &portService{s: s})
	if opts.Reflection {
		reflection.Register(s.grpc)
	}
	return s, nil
}

// Options returns the options in force, defaults filled in.
func (s *Server) Options() Options { return s.opts }

// Serve serves gRPC on every listener (a local socket, a tunnel, …) until
// ctx is cancelled or Close is called, then closes the server (see Close).
// A call's actor in the audit log is who its connection proves it is (the
// peer's uid on a unix socket, the bearer token on TCP), not the
// agentd-actor metadata it sends: only on the tunnel Run serves is that
// metadata, set by the hub, the actor.
// Serve returns nil after a shutdown caused by ctx or Close; if a listener
// fails first, everything stops and its error is returned. The listeners
// are closed when Serve returns. Serve is called once; after Close it
// returns ErrServerClosed.
func (s *Server) Serve(ctx context.Context, listeners ...net.Listener) error {
	if len(listeners) == 0 {
		return errors.New("serve: no listener")
	}
	if s.closing.Load() {
		for _, lis := range listeners {
			_ = lis.Close()
		}
		return ErrServerClosed
	}
	s.served.Store(true)
	errc := make(chan error, len(listeners))
	for _, lis := range listeners {
		go func() { errc <- s.grpc.Serve(lis) }()
	}
	var failed error
	pending := len(listeners)
	select {
	case failed = <-errc: // a listener failed, or Close stopped the server
		pending--
	case <-ctx.Done():
	}
	if s.closing.Load() {
		failed = nil // grpc.Serve returns nil after a stop; ErrServerStopped if it came too late to start
	}
	s.Close()
	for range pending {
		<-errc
	}
	return failed
}

// Close stops the server and releases everything New started. A server
// that has served first adds the agentd.stop record to the activity log;
// then it stops taking calls, stops the running commands and Python
// sessions (SIGTERM, a grace period, SIGKILL), closes the audit log, ends
// activity watches once they have sent its last records, and gives calls
// up to 5 s to end before they are cut. Serve calls Close when it stops;
// Close may also be called without Serve (an error after New), more than
// once, and concurrently with Serve: every call returns once the server is
// closed.
func (s *Server) Close() {
	s.closeOnce.Do(s.close)
}

func (s *Server) close() {
	s.closing.Store(true)
	if s.grpc == nil { // New failed half way: only services to release
		s.release()
		return
	}
	if s.served.Load() {
		// The first record of the shutdown: it tells the hub (through its
		// activity watch, still open) that this machine takes no more
		// calls, so it shows offline now rather than when the last call
		// has drained.
		s.activity.Add(activity.Record{Kind: wire.KindStop, Summary: "agentd is stopping: no new calls; running commands get TERM, then KILL after the grace period", Outcome: activity.OK})
	}
	s.health.Shutdown()
	stopped := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(stopped)
	}()
	// Stop the commands while the server drains: their streams end when
	// they exit, which lets GracefulStop finish.
	s.release()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		s.grpc.Stop()
		<-stopped
	}
}

// newServices builds the services; on error, Close releases what was
// built.
func (s *Server) newServices(ctx context.Context) error {
	var err error
	if s.opts.SecretsDir != "" {
		s.secrets = newSecretStore(s.opts.SecretsDir)
	}
	if s.files, err = newFileService(ctx, s); err != nil {
		return err
	}
	if s.procs, err = newProcessService(ctx, s); err != nil {
		return err
	}
	if s.python, err = newPythonService(ctx, s); err != nil {
		return err
	}
	s.snaps, err = newSnapshotService(ctx, s)
	return err
}

// release stops what the services run (probes, Python sessions and their
// janitor, commands, background closes of replaced files) and closes the
// audit log. Only close calls it, once; services New did not get to are nil.
func (s *Server) release() {
	s.probes.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if s.python != nil {
		if err := s.python.Close(ctx); err != nil {
			s.log.Warn("stopping python sessions", zap.Error(err))
		}
	}
	if s.procs != nil {
		if err := s.procs.Close(ctx); err != nil {
			s.log.Warn("stopping processes", zap.Error(err))
		}
	}
	if s.files != nil {
		s.files.fs.Wait()
	}
	if err := s.activity.Close(); err != nil {
		s.log.Warn("closing the audit log", zap.Error(err))
	}
	s.lastSeq = s.activity.LastSeq()
	close(s.logClosed)
}

// watchDrain bounds how long a shutdown waits for an activity watcher to
// take the last records.
const watchDrain = time.Second

// endWatches ends ActivityService.Watch calls at shutdown, once they have
// sent the audit log's last record (the exits of the commands shutdown
// stopped): a watch never ends by itself, and the hub keeps one open on
// every tunnel, so GracefulStop would otherwise wait for its deadline and
// the hub would see the machine go offline only then.
func (s *Server) endWatches(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if info.FullMethod != agentdv1.ActivityService_Watch_FullMethodName {
		return handler(srv, ss)
	}
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	w := &watchStream{ServerStream: ss, ctx: ctx, sent: make(chan struct{}, 1)}
	go func() {
		select {
		case <-ctx.Done():
			return
		case <-s.logClosed:
		}
		timeout := time.NewTimer(watchDrain)
		defer timeout.Stop()
		for w.seq.Load() < s.lastSeq {
			select {
			case <-w.sent:
			case <-ctx.Done():
				return
			case <-timeout.C:
				s.log.Warn("activity watcher did not take the last records in time; ending it",
					zap.Uint64("sent", w.seq.Load()), zap.Uint64("last", s.lastSeq))
				cancel()
				return
			}
		}
		s.log.Debug("activity watcher has every record; ending it", zap.Uint64("sent", w.seq.Load()))
		cancel()
	}()
	return handler(srv, w)
}

// watchStream is a Watch call whose context endWatches ends; it tracks the
// last sequence number the watcher has.
type watchStream struct {
	grpc.ServerStream
	ctx  context.Context
	seq  atomic.Uint64 // the watcher has every record up to this one
	sent chan struct{} // a record was sent
}

func (w *watchStream) Context() context.Context { return w.ctx }

func (w *watchStream) RecvMsg(m any) error {
	err := w.ServerStream.RecvMsg(m)
	if req, ok := m.(*agentdv1.WatchRequest); ok && err == nil {
		w.saw(req.GetSinceSeq())
	}
	return err
}

func (w *watchStream) SendMsg(m any) error {
	err := w.ServerStream.SendMsg(m)
	if resp, ok := m.(*agentdv1.WatchResponse); ok && err == nil {
		w.saw(resp.GetRecord().GetSeq())
		select {
		case w.sent <- struct{}{}:
		default:
		}
	}
	return err
}

func (w *watchStream) saw(seq uint64) {
	for {
		cur := w.seq.Load()
		if seq <= cur || w.seq.CompareAndSwap(cur, seq) {
			return
		}
	}
}

func (s *Server) authorize(ctx context.Context) error {
	if s.opts.Token == "" {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get(wire.MDAuthorization) {
		tok, ok := strings.CutPrefix(v, wire.BearerPrefix)
		if ok && subtle.ConstantTimeCompare([]byte(tok), []byte(s.opts.Token)) == 1 {
			return nil
		}
	}
	return status.Error(codes.Unauthenticated, "missing or wrong bearer token: pass the daemon's token (agentctl --token-file FILE)")
}

func (s *Server) authUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if strings.HasPrefix(info.FullMethod, "/grpc.health.v1.Health/") {
		return handler(ctx, req)
	}
	if err := s.authorize(ctx); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (s *Server) authStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := s.authorize(ss.Context()); err != nil {
		return err
	}
	return handler(srv, ss)
}

// childOOMScoreAdj is the OOM score adjustment of what the daemon runs: in a
// sandbox, commands that eat the memory limit die before agentd does (agentd
// keeps the container's 0; raising a score needs no privilege, lowering one
// does, and some engines run where even root may not).
func childOOMScoreAdj(mode string) int {
	if mode == ModeSandbox {
		return 500
	}
	return 0
}

func defaultWorkspace(mode string) (string, error) {
	if mode == ModeSandbox {
		return "/workspace", nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no workspace given and no home directory: %w", err)
	}
	return home, nil
}
