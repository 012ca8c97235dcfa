// Package agentd is the daemon: it wires the domain packages (runner,
// internal/files, …) into the agentd.v1 gRPC services, converts between proto
// messages and domain types at the edge, and maps domain errors to status
// codes. It serves on any net.Listener: a local unix socket, a loopback TCP
// port, or the tunnel the daemon dialled to its hub.
package agentd
