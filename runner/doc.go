// Package runner is the process engine of the daemon: it starts commands in
// their own process group (or their own session with a pty), feeds their
// stdin, retains the head and tail of their output with absolute byte
// offsets, streams that output live to attached subscribers, enforces
// timeouts by signalling the whole group (SIGTERM, a grace period, SIGKILL),
// and remembers finished processes for a while so that they can be attached
// to again.
//
// The package knows nothing of gRPC: errors are classified with
// internal/errs so that the RPC edge can map them to status codes.
//
// # Output: retention and live streaming
//
// Each output stream has one retention buffer: its first RetainHead bytes
// and a ring of its last RetainTail bytes, addressed by absolute offsets.
// Subscribers have no queue of their own; each keeps an offset per stream
// and copies from the buffer (at most 32 KiB an event). A subscriber that
// asks for bytes the buffer no longer holds gets a Gap event and resumes
// where the retained data does.
//
// Live streaming is lossless through backpressure: the goroutine reading a
// child's pipe never appends bytes that would push unread data of an
// attached subscriber out of the ring; it waits for the subscriber, and the
// child blocks on its full pipe meanwhile. Memory stays bounded by the
// retention limits whatever the output's size, and with nobody attached the
// output is read at full speed and its middle dropped. A subscriber that
// reads nothing for Options.StallTimeout stops holding the process back
// (it is told of what it missed by a Gap), so a stuck client cannot freeze
// a command forever.
//
// # Lifetime
//
// A process's lifetime does not depend on any context or subscriber. It
// has finished when its leader has exited and its output has been read to
// the end; output that stays open because of background processes is read
// on only while something arrives (Options.DrainTimeout). When the process
// was timed out or signalled with TERM or KILL, whatever is left of its
// group is killed as soon as the leader exits, so that no grandchild
// survives. Finished processes are forgotten Options.Linger after they
// exit, lazily, on the next call to the Manager.
//
// # Environment
//
// Children get the base environment (Options.Env, typically the user's
// login environment from LoginEnv) with the Spec's variables over it. The
// daemon's own AGENTD_* variables are removed from the base and refused in
// a Spec, and no descriptor of the daemon besides stdin, stdout and stderr
// is inherited.
//
// Orphaned grandchildren are reparented to init, or to the nearest
// subreaper: where the daemon runs as PID 1 (a container without an init)
// they are not reaped by the runner; run such containers with an init
// (docker run --init).
package runner
