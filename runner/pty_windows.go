package runner

import (
	"errors"
	"os"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// ptySupported refuses Spec.Pty on Windows. ConPTY exists, but the runner
// does not drive it yet; a pty is refused rather than faked with pipes.
func ptySupported() error {
	return errs.New(errs.Invalid, "a pty is not supported on windows: start the command without one (stdout and stderr then come as separate streams)")
}

// openPty is never reached on Windows (prepare refuses a pty).
func openPty(*PtySize) (master, tty *os.File, err error) { return nil, nil, ptySupported() }

// setPtySize is never reached on Windows: no process has a pty.
func setPtySize(*os.File, PtySize) error { return errors.ErrUnsupported }
