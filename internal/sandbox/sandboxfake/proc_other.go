//go:build !unix

package sandboxfake

import (
	"os"
	"syscall"
)

// Without process groups: the process alone.

func groupAttr() *syscall.SysProcAttr { return nil }

func terminate(p *os.Process) { _ = p.Kill() }

func killGroup(p *os.Process) { _ = p.Kill() }

func exitCode(ps *os.ProcessState) int { return ps.ExitCode() }

func stopGroup(*os.Process) {}

func continueGroup(*os.Process) {}
