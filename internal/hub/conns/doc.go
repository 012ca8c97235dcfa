// Package conns is the hub's listener side: what happens to a connection
// between accept and the server that serves it. It splits one port between
// the native gRPC server and net/http (Splitter), caps the connections each
// client address, each sandbox and the whole hub hold open (Limiter, with
// TCPClientKey and UnixPeerKey), and tells the address of the client behind
// trusted reverse proxies (ClientAddr).
//
// # One port, two servers
//
// The hub serves gRPC and HTTP on one port. Handing gRPC to net/http
// (grpc.Server.ServeHTTP) works but costs a write system call per 16 KiB
// HTTP/2 frame and several copies: through the hub, stdout moved far
// slower than over a direct connection. So each accepted connection is
// classified once and handed whole to one of two servers:
//
//   - plaintext: a connection that opens with the HTTP/2 client preface
//     ("PRI * HTTP/2.0…", which gRPC clients send at once) goes to the
//     native grpc.Server; anything else (HTTP/1.1: pairing, the tunnel
//     websocket, /healthz, /metrics) to net/http.
//   - TLS: a client whose hello offers "h2" and not "http/1.1" is a gRPC
//     client (grpc-go and the other gRPC stacks offer only "h2") and goes to
//     the grpc.Server; a client that offers "http/1.1" (browsers, curl,
//     Prometheus, the daemon's websocket) goes to net/http, which still
//     serves gRPC over HTTP/2 through ServeHTTP should such a client speak it.
//
// Not served here: a plaintext HTTP/2 request that is not gRPC (curl
// --http2-prior-knowledge): the grpc.Server answers it 415.
//
// # Connection caps
//
// Every open connection holds a file descriptor; a hub out of them cannot
// accept, open its database nor dial Docker. So connections are counted
// as they are accepted and the excess is closed at once, before it is
// read from:
//
//   - per client: on the TCP port by remote address (a reverse proxy
//     named by the trusted proxies is not capped: it carries everyone), on
//     the sandboxes' unix socket by the peer's cgroup, i.e. its container
//     (SO_PEERCRED gives the pid of the process that connected; every
//     process of one container shares its cgroup, and a sandbox cannot
//     move itself out of it; a hub in a pid namespace of its own, which
//     cannot see its sandboxes' processes, counts them in the total only);
//   - in total, below the process's RLIMIT_NOFILE (see TotalCap), so that
//     a flood from many clients still leaves descriptors for the hub's own
//     work.
//
// The package knows nothing of the hub: it never imports internal/hub.
package conns
