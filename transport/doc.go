// Package transport is the tunnel between a daemon and its hub.
//
// The daemon dials out to the hub over a websocket (GET /v1/tunnel,
// subprotocol agentd.tunnel.v1), proves who it is by signing a fresh nonce
// the hub sends with its Ed25519 key, and then one HTTP/2 (gRPC) connection
// rides directly on the websocket in binary messages. The daemon is the gRPC
// server on that connection, the hub the gRPC client.
//
// The daemon side is a [Tunnel]: a net.Listener whose Accept returns a new
// authenticated connection each time the tunnel (re)connects, so the daemon
// serves it like any other listener (grpc.Server.Serve). Reconnects use
// exponential backoff with full jitter; a machine the hub refuses (revoked,
// unknown, wrong key) retries slowly and says why in [Tunnel.Status].
//
// The hub side is an [Acceptor] (the http.Handler for GET /v1/tunnel) that
// runs the challenge and hands each authenticated connection to a callback,
// usually [Registry.Add]; the [Registry] holds the tunnels as gRPC
// transports of one shared *grpc.ClientConn (a SubConn per tunnel, picked
// by the machine a call is for), hands out a [MachineConn] per machine,
// replaces a machine's tunnel when it reconnects and closes it on revoke.
//
// The handshake, in text messages before the switch to binary:
//
//	hub    → daemon  {"type":"challenge","nonce":"<base64url, 32 random bytes>","expires":"<RFC 3339>"}
//	daemon → hub     {"type":"response","nonce":"<the nonce>","host":"<host dialled>","signature":"<base64>"}
//	hub    → daemon  {"type":"ok"}  or  {"type":"rejected","reason":"revoked","org":"acme","message":"…"}
//
// The signature is Ed25519 over "agentd-tunnel-v1|<host>|<machine id>|<nonce>",
// where host is the host (and non-default port) the daemon dialled, so a
// response made for one hub is worthless to another.
package transport
