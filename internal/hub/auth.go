package hub

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/rpcerr"
	"github.com/devdepot-ai/agentd/internal/wire"
)

// caller is who made a call: the API token, its org, and whether it may
// act on the whole hub.
type caller struct {
	token store.Token
	org   store.Org
	owner bool // an owner token (agenthub init's, or made with --owner), or the owner's console link
}

type callerKey struct{}

func callerFrom(ctx context.Context) (*caller, bool) {
	c, ok := ctx.Value(callerKey{}).(*caller)
	return c, ok
}

// authenticator resolves API tokens to callers, throttling last-used writes.
type authenticator struct {
	store store.Store
	now   func() time.Time

	mu       sync.Mutex
	touched  map[string]time.Time // token id -> last TouchToken
	firstOrg string               // id of the hub's first org, once known
}

// authenticate is resolve for a caller outside the gRPC servers'
// interceptors that must hand gRPC a status (the connection gate's tap
// handle): the same refusal, its code and message made here.
func (a *authenticator) authenticate(ctx context.Context) (*caller, error) {
	c, err := a.resolve(ctx)
	if err != nil {
		return nil, rpcerr.Status(err)
	}
	return c, nil
}

// resolve finds the caller of ctx's API token. A missing, malformed,
// unknown or revoked token is errs.Unauthenticated; a store that fails,
// errs.Unavailable.
func (a *authenticator) resolve(ctx context.Context) (*caller, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	var raw string
	for _, v := range md.Get(wire.MDAuthorization) {
		if t, ok := strings.CutPrefix(v, wire.BearerPrefix); ok {
			raw = strings.TrimSpace(t)
			break
		}
	}
	if raw == "" {
		return nil, errs.New(errs.Unauthenticated, "no API token: pass one as 'authorization: Bearer TOKEN' (agentctl reads $AGENTD_TOKEN)")
	}
	hash, err := store.ParseToken(raw)
	if err != nil {
		return nil, errs.New(errs.Unauthenticated, "that is not an agenthub API token (they start with agt_)")
	}
	tok, err := a.store.TokenByHash(ctx, hash)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, errs.New(errs.Unauthenticated, "unknown API token")
	case errors.Is(err, store.ErrRevoked):
		return nil, errs.New(errs.Unauthenticated, "this API token was revoked; ask an admin for a new one")
	case err != nil:
		return nil, errs.New(errs.Unavailable, "token lookup: %v", err)
	}
	org, err := a.store.Org(ctx, tok.OrgID)
	if err != nil {
		return nil, errs.New(errs.Unavailable, "org lookup: %v", err)
	}
	c := &caller{token: tok, org: org, owner: isOwner(tok)}
	a.touch(ctx, tok.ID)
	return c, nil
}

// isOwner reports whether a token acts for the hub's owner: ownership is
// the token's (agenthub init's, or one made with 'admin token create
// --owner'), never its org's, and only an admin token has it.
func isOwner(t store.Token) bool { return t.Owner && t.Role == store.RoleAdmin }

// firstOrgID is the hub's first org: where 'agenthub console-link' signs
// the owner in.
func (a *authenticator) firstOrgID(ctx context.Context) (string, error) {
	a.mu.Lock()
	id := a.firstOrg
	a.mu.Unlock()
	if id != "" {
		return id, nil
	}
	orgs, err := a.store.ListOrgs(ctx)
	if err != nil || len(orgs) == 0 {
		return "", err
	}
	a.mu.Lock()
	a.firstOrg = orgs[0].ID
	a.mu.Unlock()
	return orgs[0].ID, nil
}

// touch records the token's use at most once a minute.
func (a *authenticator) touch(ctx context.Context, id string) {
	now := a.now()
	a.mu.Lock()
	if now.Sub(a.touched[id]) < time.Minute {
		a.mu.Unlock()
		return
	}
	a.touched[id] = now
	a.mu.Unlock()
	_ = a.store.TouchToken(context.WithoutCancel(ctx), id, now)
}

// public methods need no token.
func public(method string) bool {
	return strings.HasPrefix(method, "/grpc.health.v1.Health/")
}

func (a *authenticator) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if public(info.FullMethod) {
		return handler(ctx, req)
	}
	c, err := a.resolve(ctx)
	if err != nil {
		return nil, err
	}
	return handler(context.WithValue(ctx, callerKey{}, c), req)
}

func (a *authenticator) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if public(info.FullMethod) {
		return handler(srv, ss)
	}
	c, err := a.resolve(ss.Context())
	if err != nil {
		return err
	}
	return handler(srv, &callerStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), callerKey{}, c)})
}

type callerStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *callerStream) Context() context.Context { return s.ctx }
