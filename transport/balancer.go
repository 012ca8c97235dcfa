package transport

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
)

// The registry's one gRPC ClientConn holds every tunnel as a SubConn (one
// HTTP/2 transport each); a call goes to the tunnel its context names.
// This load-balancing policy is what makes that work: it creates no
// SubConns of its own, hands the registry its balancer.ClientConn, and
// picks by the entry in the call's context. One ClientConn instead of one
// per tunnel saves each idle tunnel three goroutines and the ClientConn's
// own state.

// tunnelsPolicy is the name of the policy in the balancer registry.
const tunnelsPolicy = "agentd_tunnels"

var registerPolicy sync.Once

// registryKey is the resolver-state attribute that carries the Registry
// to the policy it built.
type registryKey struct{}

// entryKey is the context key naming the tunnel a call goes to.
type entryKey struct{}

type policyBuilder struct{}

func (policyBuilder) Name() string { return tunnelsPolicy }

func (policyBuilder) Build(cc balancer.ClientConn, _ balancer.BuildOptions) balancer.Balancer {
	return &policy{cc: cc}
}

type policy struct {
	cc   balancer.ClientConn
	once sync.Once
}

func (p *policy) UpdateClientConnState(s balancer.ClientConnState) error {
	if r, ok := s.ResolverState.Attributes.Value(registryKey{}).(*Registry); ok {
		p.once.Do(func() { r.attach(p.cc) })
	}
	return nil
}

func (*policy) ResolverError(error) {}

// UpdateSubConnState is not used: every SubConn has a StateListener.
func (*policy) UpdateSubConnState(balancer.SubConn, balancer.SubConnState) {}

func (*policy) Close() {}

func (*policy) ExitIdle() {}

// picker sends a call to the tunnel named in its context; while that
// tunnel's transport is still coming up the call waits (for the next
// picker, which every state change brings).
type picker struct{}

var errNoTunnel = status.Error(codes.Internal, "transport: a call through the registry's connection without a tunnel")

func (picker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	e, ok := info.Ctx.Value(entryKey{}).(*entry)
	if !ok {
		return balancer.PickResult{}, errNoTunnel
	}
	e.mu.Lock()
	sc, st, wasReady := e.sc, e.state, e.wasReady
	e.mu.Unlock()
	switch {
	case st == connectivity.Ready:
		return balancer.PickResult{SubConn: sc}, nil
	case st == connectivity.Shutdown, st == connectivity.TransientFailure, st == connectivity.Idle && wasReady:
		return balancer.PickResult{}, status.Errorf(codes.Unavailable, "the tunnel of machine %s closed", e.MachineID)
	}
	return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
}

// MachineConn is a machine's tunnel as a gRPC client connection: calls
// made on it go to that machine's daemon. Registry.Get and Wait return it.
type MachineConn struct {
	cc *grpc.ClientConn
	e  *entry
}

var _ grpc.ClientConnInterface = MachineConn{}

// Invoke makes a unary call to the machine.
func (t MachineConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return t.cc.Invoke(context.WithValue(ctx, entryKey{}, t.e), method, args, reply, opts...)
}

// NewStream opens a stream to the machine.
func (t MachineConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return t.cc.NewStream(context.WithValue(ctx, entryKey{}, t.e), desc, method, opts...)
}
