//go:build unix

package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

const loginEnvMarker = "__agentd_login_env__"

// LoginEnv returns the environment a login shell sets up for the user, by
// running `shell -l -c 'env -0'` with stdin from /dev/null (5 s at most).
// The daemon calls it once at start so that commands see the PATH and the
// variables the user has in a terminal, not the service manager's bare
// environment; on error it should fall back to os.Environ().
//
// Whatever the shell's startup files print before the environment is
// skipped. AGENTD_* variables are not removed here: the Manager drops them
// from any base environment it is given.
func LoginEnv(ctx context.Context, shell string) ([]string, error) {
	if shell == "" {
		return nil, errors.New("login env: no shell given")
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, shell, "-l", "-c", "echo "+loginEnvMarker+"; exec env -0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = CleanEnv(os.Environ())
	if home, err := os.UserHomeDir(); err == nil {
		cmd.Dir = home
	}
	cmd.Cancel = func() error {
		// The whole group: a profile may have started helpers.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return nil, fmt.Errorf("login env from %s -l: %w (%s)", shell, err, lastLine(msg))
		}
		return nil, fmt.Errorf("login env from %s -l: %w", shell, err)
	}
	_, rest, ok := bytes.Cut(out, []byte(loginEnvMarker+"\n"))
	if !ok {
		return nil, fmt.Errorf("login env from %s -l: unexpected output", shell)
	}
	var env []string
	for kv := range bytes.SplitSeq(rest, []byte{0}) {
		if bytes.IndexByte(kv, '=') > 0 {
			env = append(env, string(kv))
		}
	}
	if len(env) == 0 {
		return nil, fmt.Errorf("login env from %s -l: empty environment", shell)
	}
	return env, nil
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
