package runner

import (
	"time"
)

// Spec describes a command to start.
type Spec struct {
	// Argv is the program and its arguments, run directly; Argv[0] is looked
	// up on the PATH of the command's environment. Exactly one of Argv and
	// Command must be set.
	Argv []string
	// Command is a command line run by the shell as `Shell -c Command`.
	Command string
	// Dir is the working directory, absolute or relative to the Manager's
	// Dir. Empty: the Manager's Dir.
	Dir string
	// Env holds variables set over the base environment. AGENTD_* names
	// are refused: they are the daemon's and never reach a child.
	Env map[string]string
	// Stdin is fed to the command's stdin, which is then closed unless
	// OpenStdin is set.
	Stdin []byte
	// OpenStdin keeps stdin open after Stdin for Input, until CloseInput.
	OpenStdin bool
	// Pty, when set, runs the command in a new pty of this size: one
	// combined output stream (StreamPty), stdin is the terminal.
	Pty *PtySize
	// Timeout, when positive, terminates the process group after this long
	// (SIGTERM, Grace, SIGKILL); the exit then reports TimedOut.
	Timeout time.Duration
	// Grace is the time between SIGTERM and SIGKILL. Zero: the Manager's
	// DefaultGrace.
	Grace time.Duration
	// RetainHead and RetainTail are the bytes kept from the start and the
	// end of each output stream for later Attach. Zero: the Manager's
	// defaults. The tail is at least 64 KiB.
	RetainHead int64
	RetainTail int64
	// Tag is free text to recognise the process by in List.
	Tag string
}

// PtySize is a terminal window size. Zero fields mean 24 rows, 80 columns.
type PtySize struct {
	Rows, Cols uint16
}

// Stream names an output stream.
type Stream int

// The output streams. A process without a pty has Stdout and Stderr; one
// with a pty has the single combined stream Pty.
const (
	StreamStdout Stream = iota + 1
	StreamStderr
	StreamPty
)

// String returns "stdout", "stderr" or "pty".
func (s Stream) String() string {
	switch s {
	case StreamStdout:
		return "stdout"
	case StreamStderr:
		return "stderr"
	case StreamPty:
		return "pty"
	}
	return "stream?"
}

// State is where a process is in its life.
type State int

// The states of a process.
const (
	StateRunning State = iota + 1
	StateExited
)

// String returns "running" or "exited".
func (s State) String() string {
	switch s {
	case StateRunning:
		return "running"
	case StateExited:
		return "exited"
	}
	return "state?"
}

// Info describes a process the Manager knows.
type Info struct {
	ID  string
	PID int
	// Argv is the argv the process was started with; for a shell command,
	// the shell, "-c" and the command.
	Argv []string
	// Command is the shell command, if the process was started with one.
	Command string
	// Dir is the absolute working directory.
	Dir       string
	Tag       string
	Pty       bool
	StdinOpen bool // stdin accepts Input
	StartTime time.Time
	State     State
	Exit      *ExitInfo // nil while running
}

// ExitInfo describes how a process ended.
type ExitInfo struct {
	// Code is the exit status, -1 when a signal killed the process.
	Code int
	// Signal is the name of the signal that killed it ("KILL"), and
	// SignalNumber its number; empty and 0 otherwise.
	Signal       string
	SignalNumber int
	// TimedOut is true when the timeout terminated the process.
	TimedOut bool
	// Reason says why the system ended it, when it did: "out of memory
	// (limit 512 MiB)", "pids limit (256) reached" (read from the cgroup's
	// event counters, Linux only); "" otherwise.
	Reason    string
	Duration  time.Duration
	StartTime time.Time
	EndTime   time.Time
	// Streams counts each output stream (stdout and stderr, or the pty).
	Streams []StreamStats
}

// StreamStats counts the bytes of one output stream.
type StreamStats struct {
	Stream Stream
	// Total is every byte the process wrote to the stream.
	Total int64
	// Retained is what is kept for Attach; Omitted what was dropped from
	// the middle (Total = Retained + Omitted).
	Retained int64
	Omitted  int64
}

// Offsets says where to start reading each stream. Stdout is also the
// offset in the pty stream of a process with a pty.
type Offsets struct {
	Stdout, Stderr int64
}

// Event is one event of a process, as delivered by a Subscription:
// Started, Output, Gap or Exited.
type Event interface{ event() }

// Started is the first event of every subscription.
type Started struct {
	ID        string
	PID       int
	StartTime time.Time
}

// Output is a chunk of output (at most 32 KiB) from Offset in Stream.
type Output struct {
	Stream Stream
	Offset int64
	Data   []byte
}

// Gap says that Bytes bytes from Offset in Stream were dropped from
// retention and cannot be replayed.
type Gap struct {
	Stream Stream
	Offset int64
	Bytes  int64
}

// Exited is the last event of a subscription.
type Exited struct {
	ExitInfo
}

func (Started) event() {}
func (Output) event()  {}
func (Gap) event()     {}
func (Exited) event()  {}
