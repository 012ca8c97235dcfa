// Package fleet knows where a machine's tunnel is and how to reach it.
//
// A hub holds the tunnels of the machines (and sandboxes) that dialled it
// in a transport.Registry. When several hubs share one store (package
// replica), a call that arrives on one replica for a machine whose tunnel
// another holds is forwarded there, over a connection both replicas
// authenticate, and the replicas tell each other of events (a machine
// revoked, a sandbox asked for, activity stored) through the store's
// Broadcaster. Calls are passed on raw: Proxy forwards the frames of every
// agentd.v1 call without decoding them, to the Route a Router chose.
//
// The hub root decides who may make a call and which machine it is for;
// the fleet only carries it. It knows nothing of sandboxes or activity:
// what the hub needs to add (a sandbox's admission of a forwarded call, a
// collector per tunnel, what to do on another replica's event) comes in
// through Options' callbacks and the typed subscriptions (OnRevoke,
// OnSandboxAsked, OnActivity).
package fleet
