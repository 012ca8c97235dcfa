// Package conformance is the one suite of checks that says whether an
// agentd gives an agent everything it depends on: files (write, read, edit,
// search, glob), processes (shell, exit codes, stderr, timeouts that kill
// the whole process group, pty), Python (one-off and sessions), snapshots
// and system info — and, for a container sandbox, the container's shape
// (uid 1000, read-only root, /workspace, writable and exec-able /tmp,
// writable home).
//
// It is the suite behind `agentctl validate` and behind the hub's
// validation of custom sandbox images, which starts the image and runs this
// suite against the agentd inside it. Keeping one suite means a user who
// runs `agentctl validate` against their image sees exactly the verdict the
// hub will reach, check for check.
//
// The checks speak only the agentd.v1 gRPC API, through a connection the
// caller supplies with whatever credentials it needs (in the context's
// outgoing metadata or in the connection's interceptors). Every failure is
// a Result that says what breaks for the agent and how to fix it, never an
// error: the target being broken is what the suite is for. The checks work
// in a scratch directory inside the target's workspace, removed at the end
// even when checks fail, and run only POSIX sh and tools found on minimal
// images.
package conformance
