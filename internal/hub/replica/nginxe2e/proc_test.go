package nginxe2e

import (
	"bytes"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// logBuffer collects a process's output; safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// proc is a child process of the test: a replica, nginx or agentd.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *logBuffer // stdout and stderr
	done chan struct{}
	err  error // the exit, once done is closed
}

// startProc starts bin with args and env. When the test ends it is sent
// stop (SIGTERM), given 10 s, then killed; its output is logged if the
// test failed.
func startProc(t testing.TB, name string, env []string, stop syscall.Signal, bin string, args ...string) *proc {
	t.Helper()
	return startOwned(t, t, name, env, stop, bin, args...)
}

// startOwned is startProc for a process that outlives the (sub)test t
// that starts it: owner stops it.
func startOwned(t, owner testing.TB, name string, env []string, stop syscall.Signal, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(bin, args...), log: &logBuffer{}, done: make(chan struct{})}
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	owner.Cleanup(func() {
		if !p.exited() {
			_ = p.cmd.Process.Signal(stop)
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				owner.Errorf("%s did not stop within 10 s of %v; killed", name, stop)
				_ = p.cmd.Process.Kill()
				<-p.done
			}
		}
		if owner.Failed() {
			owner.Logf("%s's output (last 6000 bytes):\n%s", name, tail(p.log.String(), 6000))
		}
	})
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill9 kills the process with SIGKILL and waits for it.
func (p *proc) kill9(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %s: %v", p.name, err)
	}
	<-p.done
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}
