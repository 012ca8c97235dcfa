// Package pyrun runs Python code for the daemon with the user's python3:
// one-off runs in a fresh interpreter, and named sessions whose interpreter
// keeps its globals between runs, like a notebook kernel.
//
// Each interpreter runs a small driver script embedded in the binary. The
// driver talks to the daemon over a pair of pipes of its own (fds 3 and 4 at
// start, framed JSON), while the code's stdout and stderr are the
// interpreter's real fds 1 and 2, read by the daemon and streamed byte for
// byte. A run streams Output events, then a Result (the repr of a trailing
// expression) or an Error (an exception), and always ends with Done.
//
// Everything the code printed reaches the caller before the Result, Error
// or Done that follows it: the driver flushes sys.stdout and sys.stderr
// before each reply, and the daemon forwards what is in the pipes before it
// emits the reply. The order between stdout and stderr is only as good as
// two pipes allow. Output written between runs (by a thread or a child the
// code left behind) is dropped.
//
// A timeout interrupts a run with SIGINT to the interpreter
// (KeyboardInterrupt); a run that will not stop within the grace period is
// killed with its whole process group, and its session is discarded. A
// one-off run's process group is killed when the run ends, a session's when
// the session ends (Close, Reset, idle expiry, Shutdown): programs the code
// started in the background go with it, unless they left the group.
// sys.exit in the code is reported as an error (a non-zero code) and leaves
// the session alive; os._exit or a crash ends it.
//
// The package knows nothing of gRPC: errors are classified with
// internal/errs so that the RPC edge can map them to status codes.
package pyrun
