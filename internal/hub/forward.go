package hub

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/devdepot-ai/agentd/internal/rpcerr"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/internal/hub/conns"
	"github.com/devdepot-ai/agentd/internal/hub/replica"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/wire"
)

// Forwarding between replicas. A call for a machine whose tunnel another
// replica holds is authenticated and authorised here, then passed on, raw
// as every routed call, to that replica's internal listener over a
// connection both ends authenticate (replica.TLSConfig). The owner trusts
// the machine, actor and conversation the forwarding replica names, and
// sends the call down the tunnel it holds; it never forwards again.

// peers holds one client connection per replica address.
type peers struct {
	tls *tls.Config

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	closed bool
}

func newPeers(cfg *tls.Config) *peers {
	return &peers{tls: cfg, conns: map[string]*grpc.ClientConn{}}
}

// conn returns the connection to the replica at addr, made on first use.
func (p *peers) conn(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("hub is closing")
	}
	if cc, ok := p.conns[addr]; ok {
		return cc, nil
	}
	cc, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(credentials.NewTLS(p.tls)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 20 * time.Second, Timeout: 10 * time.Second}),
	)
	if err != nil {
		return nil, err
	}
	p.conns[addr] = cc
	return cc, nil
}

func (p *peers) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, cc := range p.conns {
		_ = cc.Close()
	}
	p.conns = nil
}

// startForwarding makes the replicas' TLS configuration, the peers'
// connections and the internal gRPC server.
func (s *Server) startForwarding(ctx context.Context) error {
	secret, err := s.store.ServerSecret(ctx)
	if err != nil {
		return err
	}
	cfg, err := replica.TLSConfig(secret)
	if err != nil {
		return err
	}
	s.peers = newPeers(cfg)
	s.internal = grpc.NewServer(
		grpc.Creds(credentials.NewTLS(cfg)),
		grpc.ForceServerCodecV2(rawCodec{}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.MaxHeaderListSize(conns.MaxHeaderBytes),
		grpc.ConnectionTimeout(conns.ClassifyTimeout),
		grpc.StreamInterceptor(rpcerr.Stream),
		grpc.UnknownServiceHandler(proxyHandler(s.routeForwarded)),
	)
	return nil
}

// ServeInternal serves calls other replicas forward, on lis (the address
// the replica registered, Options.Replica.Addr), until ctx ends or the
// server closes. Only for a replica.
func (s *Server) ServeInternal(ctx context.Context, lis net.Listener) error {
	if s.internal == nil {
		_ = lis.Close()
		return errors.New("hub: ServeInternal on a hub that is not a replica")
	}
	stop := context.AfterFunc(ctx, s.internal.Stop)
	defer stop()
	return ignoreClosed(s.internal.Serve(lis))
}

// ReplicaID is the hub's ID in the replica registry ("" if it is not a
// replica).
func (s *Server) ReplicaID() string {
	if s.replicas == nil {
		return ""
	}
	return s.replicas.ID()
}

// routeRemote is the route of a call for a machine whose tunnel another
// live replica holds; ok false if none does.
func (s *Server) routeRemote(ctx context.Context, id string, md metadata.MD) (Route, bool, error) {
	if s.replicas == nil {
		return Route{}, false, nil
	}
	r, err := s.replicas.Lookup(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && r.ReplicaID == s.replicas.ID()) {
		return Route{}, false, nil
	}
	if err != nil {
		return Route{}, false, status.Errorf(codes.Unavailable, "route lookup: %v", err)
	}
	if r.Addr == "" {
		s.replicas.Forget(id, r.ReplicaID)
		return Route{}, false, status.Errorf(codes.Unavailable, "machine %s is connected to hub replica %s, which takes no forwarded calls (no internal address); retry", id, r.ReplicaID)
	}
	cc, err := s.peers.conn(r.Addr)
	if err != nil {
		s.replicas.Forget(id, r.ReplicaID)
		return Route{}, false, status.Errorf(codes.Unavailable, "replica %s: %v", r.ReplicaID, err)
	}
	md = md.Copy()
	md.Set(wire.MDMachine, id)
	// The route may be a cached one: a call along it that fails (the
	// holder gone, or the machine no longer on it) drops it, so that the
	// next call looks the route up again.
	forget := func(err error) error {
		if routeFailed(err) {
			s.replicas.Forget(id, r.ReplicaID)
		}
		return err
	}
	return Route{Conn: cc, MD: md, Done: forget}, true, nil
}

// routeFailed tells whether a forwarded call's error may mean its route is
// wrong (the holder gone, hung, or no longer holding the machine), rather
// than an answer from the machine (a file not found …).
func routeFailed(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Unknown, codes.Internal:
		return true
	}
	return false
}

// routeForwarded routes a call another replica forwarded: to the tunnel
// this replica holds, with the actor and conversation it names.
func (s *Server) routeForwarded(ctx context.Context, _ string) (Route, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	id := firstMD(md, wire.MDMachine)
	cc, ok := s.registry.Get(id)
	if !ok {
		return Route{}, status.Errorf(codes.Unavailable, "machine %s is not connected to this replica any more; retry", id)
	}
	out := metadata.Pairs(wire.MDActor, firstMD(md, wire.MDActor))
	if conv := firstMD(md, wire.MDConversation); conv != "" {
		out.Set(wire.MDConversation, conv)
	}
	if client := firstMD(md, wire.MDClient); client != "" {
		out.Set(wire.MDClient, client)
	}
	r := Route{Conn: cc, MD: out}
	if s.sandboxes != nil && isSandboxID(id) {
		// This replica's egress rules guard the sandbox, whichever
		// replica the call came in on.
		if err := s.sandboxes.EgressRefusalFor(ctx, id); err != nil {
			return Route{}, err
		}
		r.Done = sandboxDone(s.sandboxes.Enter(ctx, id))
	}
	return r, nil
}
