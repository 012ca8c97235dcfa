package hub

import (
	"context"
	"errors"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/fleet"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/rpcerr"
	"github.com/devdepot-ai/agentd/internal/wire"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// Route is where a routed call goes (see fleet.Route).
type Route = fleet.Route

// target is what a call's metadata names: a machine, or an environment
// and a conversation (the org's default environment when neither is
// named), and the client that makes it.
type target struct {
	machine, env, conv, client string
}

func targetOf(ctx context.Context) (target, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	t := target{machine: firstMD(md, wire.MDMachine), env: firstMD(md, wire.MDEnvironment),
		conv: firstMD(md, wire.MDConversation), client: firstMD(md, wire.MDClient)}
	if t.machine != "" && t.env != "" {
		return target{}, errs.New(errs.Invalid, "name a machine (agentd-machine) or an environment (agentd-environment), not both")
	}
	return t, nil
}

// route is the one routing decision of an agentd.v1 call: (the caller's
// org, the machine it names | an environment and a conversation) → the
// Route to the machine's tunnel, here or on the replica that holds it.
// In order: the environment becomes a machine (a paired machine, or the
// conversation's sandbox, made if need be); the machine must be the
// org's, not removed, and one the caller may use; then its tunnel on this
// replica, else on another, else it is offline. Every refusal is an
// error of the call, and those a person should see are recorded.
func (s *Server) route(ctx context.Context, method string) (Route, error) {
	c, ok := callerFrom(ctx)
	if !ok {
		return Route{}, errs.New(errs.Unauthenticated, "no caller")
	}
	t, err := targetOf(ctx)
	if err != nil {
		return Route{}, err
	}
	id := t.machine
	var note string
	if id == "" {
		nctx, noted := sandboxes.WithNote(ctx)
		id, err = s.routeEnvironment(nctx, c.org, t.env, t.conv)
		note = noted()
		if err != nil {
			if rpcerr.Code(err) == codes.FailedPrecondition {
				s.recordRefusal(ctx, c.org, c.token.Name, t.conv, t.env, method, err)
			}
			return Route{}, err
		}
	}
	m, err := s.store.Machine(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound) || (err == nil && m.OrgID != c.org.ID):
		return Route{}, errs.New(errs.NotFound, "machine %s not found in org %s; list machines with 'agentctl machines'", id, c.org.Name)
	case err != nil:
		return Route{}, errs.New(errs.Unavailable, "machine lookup: %v", err)
	case !m.RevokedAt.IsZero():
		return Route{}, errs.New(errs.Precondition, "machine %s was removed from org %s at %s", id, c.org.Name, m.RevokedAt.Format(time.RFC3339))
	}
	if err := s.sandboxAccess(ctx, c, id); err != nil {
		if rpcerr.Code(err) == codes.PermissionDenied {
			msg := rpcerr.Message(err)
			s.activity.Record(ctx, c.org.ID, id, &agentdv1.ActivityRecord{
				Actor: c.token.Name, Client: t.client, Conversation: t.conv,
				Kind: wire.KindCallRefused, Summary: "refused " + method + ": " + msg,
				Outcome: agentdv1.Outcome_OUTCOME_ERROR, Error: msg, ObjectId: id})
		}
		return Route{}, err
	}

	out := metadata.Pairs(wire.MDActor, c.token.Name)
	if t.conv != "" {
		out.Set(wire.MDConversation, t.conv)
	}
	if t.client != "" {
		out.Set(wire.MDClient, t.client)
	}
	if s.sandboxes != nil && t.machine != "" && isSandboxID(id) {
		// A sandbox named by its id: paused or stopped, the call wakes it.
		if note, err = s.sandboxes.Wake(ctx, c.org, id); err != nil {
			return Route{}, err
		}
	}
	rec := s.activity.NewCall(c.org.ID, c.token.Name, t.client, t.conv, t.env, id, method)
	rec.Note(note)
	cc, here := s.fleet.Get(id)
	if !here {
		r, remote, err := s.fleet.RouteRemote(ctx, id, out)
		if remote || err != nil {
			r.Rec, r.Streams = rec, s.fleet.Streams()
			return r, err
		}
		seen := "never"
		if !m.LastSeenAt.IsZero() {
			seen = m.LastSeenAt.Format(time.RFC3339) + ", " + s.opts.Now().Sub(m.LastSeenAt).Round(time.Second).String() + " ago"
		}
		return Route{}, errs.New(errs.Unavailable, "machine %s is offline (last seen %s)", id, seen)
	}
	r := Route{Conn: cc, MD: out, Rec: rec, Streams: s.fleet.Streams()}
	if !isSandboxID(id) {
		r.StreamMachine = id // a sandbox's socket serves tunnels only
	}
	if s.sandboxes != nil && isSandboxID(id) {
		if err := s.sandboxes.EgressRefusalFor(ctx, id); err != nil {
			return Route{}, err
		}
		done, began := s.sandboxes.Enter(ctx, id), s.sandboxes.Now()
		r.Done = func(err error) error {
			err = done(err)
			// Its processes were ended by a stop: the record says why,
			// and so does a later call that looks for one of them.
			rec.Note(s.sandboxes.StopNote(id, began))
			return err
		}
		// Its processes a lifecycle step ended: the hub answers for them.
		r.Answer = func(req []byte, err error) ([][]byte, error) {
			return s.sandboxes.AnswerEnded(ctx, id, method, req, err)
		}
		r.Edit = s.sandboxes.EditEnded(ctx, id, method)
	}
	return r, nil
}

// routeEnvironment finds the machine an environment's call goes to: the
// paired machine it names, or the conversation's sandbox (made if need
// be). No environment named: the org's default. An environment that cannot
// take the call fails it (FAILED_PRECONDITION naming it and why); the call
// never runs anywhere else.
func (s *Server) routeEnvironment(ctx context.Context, org store.Org, env, conv string) (string, error) {
	if env == "" {
		d, err := s.defaultEnv(ctx, org)
		if err != nil {
			return "", err
		}
		env = d
	}
	if env != BuiltinEnvironment && !isSandboxID(env) {
		if _, err := s.store.Environment(ctx, org.ID, env); errors.Is(err, store.ErrNotFound) {
			if m, err := s.store.Machine(ctx, env); err == nil && m.OrgID == org.ID {
				return m.ID, nil // a paired machine as an environment
			}
		}
	}
	if s.sandboxes == nil {
		return "", errs.New(errs.Precondition, "environment %s: %s; or name a paired machine (agentctl --machine ID, see 'agentctl machines')",
			env, rpcerr.Message(noSandboxes))
	}
	if len(conv) > 256 || !utf8Printable(conv) || strings.HasPrefix(conv, "hub:") {
		return "", errs.New(errs.Invalid, "conversation id: want at most 256 printable characters, not starting with 'hub:' (the hub's own)")
	}
	return s.sandboxes.Get(ctx, org, env, conv)
}

func firstMD(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}
