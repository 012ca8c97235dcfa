package fleet

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/replica"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/rpcerr"
	"github.com/devdepot-ai/agentd/internal/wire"
)

// Forwarding between replicas. A call for a machine whose tunnel another
// replica holds is authenticated and authorised by the hub that took it,
// then passed on (RouteRemote), raw
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
func (f *Fleet) startForwarding(ctx context.Context) error {
	secret, err := f.o.Store.ServerSecret(ctx)
	if err != nil {
		return err
	}
	cfg, err := replica.TLSConfig(secret)
	if err != nil {
		return err
	}
	f.peers = newPeers(cfg)
	f.internal = grpc.NewServer(
		grpc.Creds(credentials.NewTLS(cfg)),
		grpc.ForceServerCodecV2(rawCodec{}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.MaxHeaderListSize(f.o.MaxHeaderBytes),
		grpc.ConnectionTimeout(f.o.HandshakeTimeout),
		grpc.StreamInterceptor(rpcerr.Stream),
		grpc.UnknownServiceHandler(Proxy(f.routeForwarded)),
	)
	return nil
}

// ServeInternal serves calls other replicas forward, on lis (the address
// the replica registered, replica.Options.Addr), until ctx ends or the
// fleet closes. Only for a replica.
func (f *Fleet) ServeInternal(ctx context.Context, lis net.Listener) error {
	if f.internal == nil {
		_ = lis.Close()
		return errors.New("hub: ServeInternal on a hub that is not a replica")
	}
	stop := context.AfterFunc(ctx, f.internal.Stop)
	defer stop()
	err := f.internal.Serve(lis)
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil // shut down as asked
	}
	return err
}

// RouteRemote is the route of a call for a machine whose tunnel another
// live replica holds, with md (who asked, which conversation) and the
// machine's ID; ok false if none does (or the hub is not a replica).
func (f *Fleet) RouteRemote(ctx context.Context, id string, md metadata.MD) (r Route, ok bool, err error) {
	if f.replicas == nil {
		return Route{}, false, nil
	}
	rt, err := f.replicas.Lookup(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && rt.ReplicaID == f.replicas.ID()) {
		return Route{}, false, nil
	}
	if err != nil {
		return Route{}, false, errs.New(errs.Unavailable, "route lookup: %v", err)
	}
	if rt.Addr == "" {
		f.replicas.Forget(id, rt.ReplicaID)
		return Route{}, false, errs.New(errs.Unavailable, "machine %s is connected to hub replica %s, which takes no forwarded calls (no internal address); retry", id, rt.ReplicaID)
	}
	cc, err := f.peers.conn(rt.Addr)
	if err != nil {
		f.replicas.Forget(id, rt.ReplicaID)
		return Route{}, false, errs.New(errs.Unavailable, "replica %s: %v", rt.ReplicaID, err)
	}
	md = md.Copy()
	md.Set(wire.MDMachine, id)
	// The route may be a cached one: a call along it that fails (the
	// holder gone, or the machine no longer on it) drops it, so that the
	// next call looks the route up again.
	forget := func(err error) error {
		if routeFailed(err) {
			f.replicas.Forget(id, rt.ReplicaID)
		}
		return err
	}
	return Route{Conn: cc, MD: md, Done: forget}, true, nil
}

// routeFailed tells whether a forwarded call's error may mean its route is
// wrong (the holder gone, hung, or no longer holding the machine), rather
// than an answer from the machine (a file not found …).
func routeFailed(err error) bool {
	switch rpcerr.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Unknown, codes.Internal:
		return true
	}
	return false
}

// routeForwarded routes a call another replica forwarded: to the tunnel
// this replica holds, with the actor and conversation it names.
func (f *Fleet) routeForwarded(ctx context.Context, _ string) (Route, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	id := firstMD(md, wire.MDMachine)
	cc, ok := f.tunnels.Get(id)
	if !ok {
		return Route{}, errs.New(errs.Unavailable, "machine %s is not connected to this replica any more; retry", id)
	}
	out := metadata.Pairs(wire.MDActor, firstMD(md, wire.MDActor))
	if conv := firstMD(md, wire.MDConversation); conv != "" {
		out.Set(wire.MDConversation, conv)
	}
	if client := firstMD(md, wire.MDClient); client != "" {
		out.Set(wire.MDClient, client)
	}
	r := Route{Conn: cc, MD: out}
	if f.o.Admit != nil {
		// This replica's rules guard the machine (a sandbox's egress),
		// whichever replica the call came in on.
		done, err := f.o.Admit(ctx, id)
		if err != nil {
			return Route{}, err
		}
		r.Done = done
	}
	return r, nil
}

func firstMD(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}
