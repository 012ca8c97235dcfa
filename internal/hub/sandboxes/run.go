package sandboxes

import (
	"context"
	"time"

	"github.com/devdepot-ai/agentd/internal/allowlist"
	"github.com/devdepot-ai/agentd/internal/egressproxy"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// Run is what an agent run's sandbox runs (the hub's AgentService makes
// one per run).
type Run struct {
	// Environment names the run's sandbox ("agent:codex"): no environment
	// can have it.
	Environment string
	// Image is the image's id: what was checked is what runs.
	Image string
	// Network is "none" or "public".
	Network string
	// Isolation is "runc" or "gvisor" ("": runc).
	Isolation string
	// Limits bound the sandbox.
	Limits sandbox.Limits
	// TTL is its lifetime from creation: it is removed then, busy or not,
	// never for idling.
	TTL time.Duration
	// Home is HOME in the workspace ("": the sandbox's tmpfs).
	Home string
	// Allow, with network "none", is the only way out: the egress proxy
	// to these destinations (empty: no proxy).
	Allow allowlist.List
	// Secrets says its resolved secrets go into it (then only admins and
	// the token that started it may call it).
	Secrets bool
	// Inject are the headers the hub's egress proxy sets on its requests
	// (brokered credentials: the proxy intercepts those hosts with the
	// org's CA, which the sandbox then trusts). Needs Allow.
	Inject []egressproxy.Inject
	// Rules are Inject as references (the container keeps them, so that a
	// restarted hub resolves them again); one per Inject, same order.
	Rules []BrokerRule
	// Env are variables its processes get (the placeholders of brokered
	// keys).
	Env []string
}

// StartRun makes an agent run's sandbox in org (a conversation of its
// own) and waits until its agentd is connected.
func (m *Manager) StartRun(ctx context.Context, org store.Org, r Run) (store.Sandbox, error) {
	limits := r.Limits
	env := envSpec{name: r.Environment, image: r.Image, network: r.Network, limits: &limits, ttl: r.TTL,
		home: r.Home, allow: r.Allow, secrets: r.Secrets, isolation: r.Isolation, inject: r.Inject, rules: r.Rules, env: r.Env}
	return m.create(ctx, org, env, store.NewID("run-"), false)
}

// BuiltinImage is the image id the built-in environment runs now, or why
// it cannot run (as a call to it would be told).
func (m *Manager) BuiltinImage(ctx context.Context, org store.Org) (string, error) {
	env, err := m.resolve(ctx, org, BuiltinEnvironment)
	return env.image, err
}
