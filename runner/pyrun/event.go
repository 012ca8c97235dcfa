package pyrun

import "time"

// Stream names an output stream of a run.
type Stream int

// The streams of a run.
const (
	Stdout Stream = 1 // the interpreter's fd 1 (sys.stdout)
	Stderr Stream = 2 // the interpreter's fd 2 (sys.stderr)
)

func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return "stream?"
}

// Event is one thing a run reports: Output, Result, Error or Done.
type Event interface{ event() }

// Output is a chunk of what the code wrote to stdout or stderr, exactly as
// written (at most 32 KiB).
type Output struct {
	Stream Stream
	Data   []byte
}

// Result is the repr of the code's trailing expression, when it is not None.
type Result struct {
	// Repr is repr() of the value, cut after 64 KiB characters with a marker.
	Repr string
}

// Error is an exception the code raised, or the way its interpreter died.
type Error struct {
	// Name is the exception's class name ("ZeroDivisionError"); "Killed"
	// when the daemon killed the interpreter; "InterpreterExited" when it
	// ended on its own during the run (os._exit, a crash).
	Name string
	// Value is str() of the exception, or what happened in words.
	Value string
	// Traceback is the formatted traceback, without the driver's frames.
	Traceback string
}

// Done ends every run; it is the last event.
type Done struct {
	// Duration is how long the run took.
	Duration time.Duration
	// TimedOut is true when the run's timeout interrupted it.
	TimedOut bool
	// Failed is true when an Error was sent.
	Failed bool
	// SessionAlive is true when the session's interpreter lives on with its
	// globals. Always false for a one-off run: its interpreter is gone.
	SessionAlive bool
}

func (Output) event() {}
func (Result) event() {}
func (Error) event()  {}
func (Done) event()   {}
