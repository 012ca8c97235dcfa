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
// A timeout interrupts a run with SIGINT (KeyboardInterrupt); a run that
// will not stop is killed with its whole process group, and its session is
// discarded. Idle sessions expire.
//
// The package knows nothing of gRPC: errors are classified with
// internal/errs so that the RPC edge can map them to status codes.
package pyrun
