// Package sandboxes is the hub's sandbox manager: the containers agenthub
// runs for an org's environments, one per (environment, conversation), and
// one per agent run.
//
// It exists so that everything a sandbox's life touches lives in one room
// with one owner: get-or-create and start (lifecycle.go), the calls in
// flight and removal (calls.go), the states a sandbox moves through
// (running, paused, stopped), the idle policy's steps and resuming on a
// call (state.go), the warm pool (pool.go), the reaper that applies the
// policy and finding sandboxes again after a restart (reaper.go), sandboxes
// across hub replicas (replicas.go), each sandbox's key (keys.go), the
// caps (quota.go), the validation of custom images (validate.go), and the
// unix socket sandboxes dial with their tunnels and egress proxy
// (socket.go, egress.go, egressguard.go).
//
// The hub builds a Manager from Options: the sandbox settings, plus narrow
// interfaces for what the manager needs of the hub (Store, Tunnels,
// Replicas) and callbacks for what it tells it. The manager never sees
// the hub itself, and knows nothing of gRPC status: its errors are
// internal/errs kinds (some matching the sentinels in errors.go), which the
// hub's interceptor turns into status codes with the message unchanged.
package sandboxes
