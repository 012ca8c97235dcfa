package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/devdepot-ai/agentd/internal/hub/console"
	"github.com/devdepot-ai/agentd/internal/hub/exposures"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/rpcerr"
	"github.com/devdepot-ai/agentd/internal/wire"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// consoleBackend lets the web console call the hub's services in process,
// as the signed-in person: the services' own role and org checks apply,
// exactly as to a gRPC caller with the session's token.
type consoleBackend struct {
	s     *Server
	admin *adminService
	envs  *environmentService

	exposures *exposures.Service
}

var _ console.Backend = (*consoleBackend)(nil)

func (b *consoleBackend) Admin() hubv1.AdminServiceServer              { return b.admin }
func (b *consoleBackend) Environments() hubv1.EnvironmentServiceServer { return b.envs }
func (b *consoleBackend) Activity() hubv1.ActivityServiceServer        { return &activityService{s: b.s} }

// Changed returns a channel closed at the next stored activity or machine
// tunnel coming up or going down.
func (b *consoleBackend) Changed() <-chan struct{} {
	return b.s.activity.Changed()
}

// CheckToken resolves an API token as the gRPC surface does.
func (b *consoleBackend) CheckToken(ctx context.Context, raw string) (console.Identity, store.ConsoleSession, error) {
	md := metadata.Pairs(wire.MDAuthorization, wire.BearerPrefix+raw)
	c, err := b.s.auth.resolve(metadata.NewIncomingContext(ctx, md))
	if rpcerr.Code(err) == codes.Unauthenticated {
		return console.Identity{}, store.ConsoleSession{}, fmt.Errorf("%w: %s", console.ErrBadToken, rpcerr.Message(err))
	}
	if err != nil {
		return console.Identity{}, store.ConsoleSession{}, err
	}
	return identity(c), store.ConsoleSession{OrgID: c.org.ID, TokenHash: c.token.Hash}, nil
}

// As returns ctx carrying the session's caller. A session whose token was
// revoked (or whose org is gone) is over: console.ErrSignedOut.
func (b *consoleBackend) As(ctx context.Context, sess store.ConsoleSession) (context.Context, console.Identity, error) {
	var c *caller
	if sess.TokenHash == (store.TokenHash{}) {
		org, err := b.s.store.Org(ctx, sess.OrgID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, console.Identity{}, console.ErrSignedOut
		}
		if err != nil {
			return nil, console.Identity{}, err
		}
		first, err := b.s.auth.firstOrgID(ctx)
		if err != nil {
			return nil, console.Identity{}, err
		}
		c = &caller{token: store.Token{OrgID: org.ID, Name: sess.Name, Role: store.RoleAdmin}, org: org, owner: first == org.ID}
	} else {
		tok, err := b.s.store.TokenByHash(ctx, sess.TokenHash)
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrRevoked) {
			return nil, console.Identity{}, console.ErrSignedOut
		}
		if err != nil {
			return nil, console.Identity{}, err
		}
		org, err := b.s.store.Org(ctx, tok.OrgID)
		if err != nil {
			return nil, console.Identity{}, err
		}
		c = &caller{token: tok, org: org, owner: isOwner(tok)}
		b.s.auth.touch(ctx, tok.ID)
	}
	if err := b.actIn(ctx, c, sess.ActingOrgID); err != nil {
		return nil, console.Identity{}, err
	}
	return context.WithValue(ctx, callerKey{}, c), identity(c), nil
}

// actIn moves the hub owner's caller into the org the session switched
// to, as agentctl --org does for the owner's token: every service call
// then names that org. Anyone else's sessions (never switched: the console
// refuses them) and an org since deleted keep their own org.
func (b *consoleBackend) actIn(ctx context.Context, c *caller, orgID string) error {
	if !c.owner || orgID == "" || orgID == c.org.ID {
		return nil
	}
	org, err := b.s.store.Org(ctx, orgID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	c.org = org
	return nil
}

func identity(c *caller) console.Identity {
	return console.Identity{Name: c.token.Name, Org: c.org.Name, Admin: c.token.Role == store.RoleAdmin, Owner: c.owner}
}

// outputTimeout bounds reading a process's retained output from its
// machine: the page never waits longer.
const outputTimeout = 5 * time.Second

// Output reads a process's retained output (head, gaps, tail) through the
// hub's routing to its machine, as agentctl attach does, up to its exit or
// what was written so far. An offline machine fails at once
// (UNAVAILABLE "machine … is offline (last seen …)").
func (b *consoleBackend) Output(ctx context.Context, machine, id string) ([]*agentdv1.ProcessEvent, error) {
	ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(wire.MDMachine, machine))
	r, err := b.s.route(ctx, "/agentd.v1.ProcessService/Attach")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(ctx, r.MD), outputTimeout)
	defer cancel()
	st, err := agentdv1.NewProcessServiceClient(r.Conn).Attach(ctx, &agentdv1.AttachRequest{Id: id})
	if r.Done != nil {
		defer func() { _ = r.Done(err) }()
	}
	if err != nil {
		return nil, err
	}
	defer cancel() // ends the reader below when the page has what it shows
	return console.CollectOutput(ctx, st, console.OutputIdle)
}

// FollowOutput streams a running process's output through the hub's
// routing, from the offsets given, until it exits.
func (b *consoleBackend) FollowOutput(ctx context.Context, machine, id string, from, stderrFrom int64, fn func(*agentdv1.ProcessEvent) error) (err error) {
	ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(wire.MDMachine, machine))
	r, err := b.s.route(ctx, "/agentd.v1.ProcessService/Attach")
	if err != nil {
		return err
	}
	if r.Done != nil {
		defer func() { err = r.Done(err) }()
	}
	ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(ctx, r.MD))
	defer cancel()
	st, err := agentdv1.NewProcessServiceClient(r.Conn).Attach(ctx, &agentdv1.AttachRequest{Id: id, FromOffset: from, StderrFromOffset: &stderrFrom})
	if err != nil {
		return err
	}
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(m.GetEvent()); err != nil {
			return err
		}
		if m.GetEvent().GetExited() != nil {
			return nil
		}
	}
}

// Process routes one ProcessService call of a console terminal through
// the hub's routing, as agentctl's calls are (the client is named
// "agenthub-console" in the hub's records).
func (b *consoleBackend) Process(ctx context.Context, machine, method string) (context.Context, agentdv1.ProcessServiceClient, func(error) error, error) {
	ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(wire.MDMachine, machine, wire.MDClient, consoleClient))
	r, err := b.s.route(ctx, method)
	if err != nil {
		return nil, nil, nil, err
	}
	done := r.Done
	if done == nil {
		done = func(err error) error { return err }
	}
	return metadata.NewOutgoingContext(ctx, r.MD), agentdv1.NewProcessServiceClient(r.Conn), done, nil
}

// consoleClient names the console as the client of the calls it makes.
const consoleClient = "agenthub-console"

// Record stores a record of the hub's own about machine in the org of
// ctx's caller.
func (b *consoleBackend) Record(ctx context.Context, machine string, r *agentdv1.ActivityRecord) {
	c, ok := callerFrom(ctx)
	if !ok {
		return
	}
	r.Client = consoleClient
	b.s.activity.Record(ctx, c.org.ID, machine, r)
}

// listTimeout bounds one machine's process list when the console has
// set no shorter deadline.
const listTimeout = 5 * time.Second

// Processes lists a machine's processes through the hub's routing, as
// agentctl ps does; an offline machine fails at once.
func (b *consoleBackend) Processes(ctx context.Context, machine string) (_ []*agentdv1.ProcessInfo, err error) {
	ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(wire.MDMachine, machine))
	r, err := b.s.route(ctx, "/agentd.v1.ProcessService/List")
	if err != nil {
		return nil, err
	}
	if r.Done != nil {
		defer func() { err = r.Done(err) }()
	}
	ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(ctx, r.MD), listTimeout)
	defer cancel()
	resp, err := agentdv1.NewProcessServiceClient(r.Conn).List(ctx, &agentdv1.ProcessServiceListRequest{})
	if err != nil {
		return nil, err
	}
	return resp.GetProcesses(), nil
}

// OnlineSince says when each live tunnel came up.
func (b *consoleBackend) OnlineSince() map[string]time.Time {
	out := map[string]time.Time{}
	for _, ti := range b.s.fleet.Tunnels() {
		out[ti.MachineID] = ti.Since
	}
	return out
}
