package hub

import (
	"context"
	"errors"
	"net"

	"github.com/devdepot-ai/agentd/internal/hub/broker"
	"github.com/devdepot-ai/agentd/internal/hub/conns"

	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// The hub's side of package sandboxes: what it hands the manager.

// BuiltinEnvironment is the name of the environment every org has.
const BuiltinEnvironment = sandboxes.BuiltinEnvironment

// replicaHubSep separates a sandbox replica's hub ID from the rest of its
// replica ID.
const replicaHubSep = sandboxes.ReplicaHubSep

// isSandboxID reports whether a machine id is a sandbox's.
func isSandboxID(id string) bool { return sandboxes.IsID(id) }

// sandboxHubID sets the hub ID of a hub that runs sandboxes: derived from
// the store's secret for the only hub on a store (the same across its
// restarts); a replica must be given its own.
func (s *Server) sandboxHubID(ctx context.Context) error {
	o := &s.opts.Sandboxes
	switch {
	case o.Driver == nil:
		return nil
	case o.HubID == "" && s.opts.Replica != nil:
		return errors.New("hub: a replica that runs sandboxes needs its own SandboxOptions.HubID, the same across its restarts (agenthub keeps it in --sandbox-dir)")
	case o.HubID == "":
		secret, err := s.store.ServerSecret(ctx)
		if err != nil {
			return err
		}
		o.HubID = sandboxes.DefaultHubID(secret)
	}
	return sandboxes.ValidHubID(o.HubID)
}

// startSandboxes makes the sandbox manager: it serves the sandboxes' unix
// socket, finds the sandboxes of an earlier run again, and starts the
// reaper and unfinished validations.
func (s *Server) startSandboxes(ctx context.Context) error {
	o := s.opts.Sandboxes
	o.Store = s.store
	o.Tunnels = s.fleet
	if s.opts.Replica != nil {
		o.Replicas = s.fleet
	}
	o.OnTunnel = s.fleet.Add
	o.Authenticate = s.authenticateMachine
	o.LimitConns = func(lis net.Listener) net.Listener {
		return s.conns.Limit(lis, s.opts.MaxConnsPerSandbox, conns.UnixPeerKey)
	}
	o.CallerToken = func(ctx context.Context) string {
		if c, ok := callerFrom(ctx); ok {
			return c.token.ID
		}
		return ""
	}
	o.CallerName = func(ctx context.Context) string {
		if c, ok := callerFrom(ctx); ok {
			return c.token.Name
		}
		return ""
	}
	o.RecordAbout = s.activity.Record
	o.Ask = s.fleet.AskSandbox
	o.Revoke = s.fleet.Revoke
	o.Gone = s.activity.SandboxGone
	o.Record = func(ctx context.Context, orgID string, r *agentdv1.ActivityRecord) {
		s.recordHub(ctx, store.Org{ID: orgID}, r)
	}
	o.Now = s.opts.Now
	o.Logger = s.log
	if o.ResolveSecret == nil && s.opts.Secrets != nil {
		o.ResolveSecret = s.opts.Secrets.Resolve
	}
	o.OrgCA = (&broker.CAs{Store: s.store, Now: s.opts.Now}).Get
	m, err := sandboxes.New(o)
	if err != nil {
		return err
	}
	// Set before Start: Close stops whatever Start started.
	s.sandboxes = m
	return m.Start(ctx)
}
