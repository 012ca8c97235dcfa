package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// errDemoTool is returned when a program the demo runs as a child process
// (agentd or agentctl) is found neither next to agenthub nor on $PATH.
var errDemoTool = errors.New("agenthub demo runs agentd and agentctl as child processes")

// demoTools are the paths of the programs `agenthub demo` runs: the hub
// binary links neither the daemon nor the CLI, so the demo runs the real
// ones, as a user would.
type demoTools struct{ agentd, agentctl string }

// findDemoTools looks agentd and agentctl up in exeDir (the directory of
// the agenthub executable: `make build` puts all three in bin/), then on
// $PATH. A missing one is an error naming it and `make build`.
func findDemoTools(exeDir string) (demoTools, error) {
	find := func(name string) (string, error) {
		if exeDir != "" {
			if p, err := exec.LookPath(filepath.Join(exeDir, name)); err == nil {
				return p, nil
			}
		}
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
		where := "on $PATH"
		if exeDir != "" {
			where = "next to agenthub (in " + exeDir + ") nor on $PATH"
		}
		return "", fmt.Errorf("%w: found no %s %s; run 'make build', which puts agentd, agentctl and agenthub in bin/", errDemoTool, name, where)
	}
	var t demoTools
	var err error
	if t.agentd, err = find("agentd"); err != nil {
		return demoTools{}, err
	}
	if t.agentctl, err = find("agentctl"); err != nil {
		return demoTools{}, err
	}
	return t, nil
}

// exeDir is the directory of the running executable ("" when unknown).
func exeDir() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	return filepath.Dir(exe)
}

// ctl runs the agentctl binary with args and stdin, its stdout to out
// and its stderr to errw, and returns its exit status (-1: it was killed).
// Ending ctx kills it.
func (t demoTools) ctl(ctx context.Context, stdin string, out, errw io.Writer, args ...string) int {
	cmd := exec.CommandContext(ctx, t.agentctl, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), out, errw
	setChildAttrs(cmd)
	err := startChild(cmd)
	if err == nil {
		err = cmd.Wait()
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode()
	case err != nil:
		fmt.Fprintf(errw, "agentctl: %v\n", err)
		return 1
	}
	return 0
}

// pair runs `agentd pair` and returns the machine id it prints.
func (t demoTools) pair(ctx context.Context, hubURL, code, name, cfgDir string) (string, error) {
	cmd := exec.CommandContext(ctx, t.agentd, "pair", "--hub", hubURL, "--code", code, "--name", name, "--config-dir", cfgDir)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	setChildAttrs(cmd)
	err := startChild(cmd)
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		return "", fmt.Errorf("agentd pair: %w: %s", err, strings.TrimSpace(errb.String()))
	}
	id := strings.TrimSpace(out.String())
	if id == "" {
		return "", errors.New("agentd pair printed no machine id")
	}
	return id, nil
}

// daemon is a running `agentd run`.
type daemon struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once it has exited and been reaped
	err  error         // its exit, once done is closed
}

// runDaemon starts `agentd run` with args after "run", its output to log.
func (t demoTools) runDaemon(log io.Writer, args ...string) (*daemon, error) {
	cmd := exec.Command(t.agentd, append([]string{"run"}, args...)...)
	cmd.Stdout, cmd.Stderr = log, log
	setChildAttrs(cmd)
	if err := startChild(cmd); err != nil {
		return nil, fmt.Errorf("start agentd run: %w", err)
	}
	d := &daemon{cmd: cmd, done: make(chan struct{})}
	go func() {
		d.err = cmd.Wait()
		close(d.done)
	}()
	return d, nil
}

// stop asks the daemon to stop (SIGTERM: it tells the hub it goes offline
// and stops what it runs), kills it when it has not within grace, and
// waits until it has exited.
func (d *daemon) stop(grace time.Duration) {
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		_ = d.cmd.Process.Kill()
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-d.done:
	case <-t.C:
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}
