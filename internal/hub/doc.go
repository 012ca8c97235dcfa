// Package hub is agenthub, the control plane: it accepts the tunnels
// machines open, pairs machines to orgs, authenticates API tokens, routes
// every agentd.v1 call to the right machine without decoding it, and keeps
// each org's activity.
package hub
