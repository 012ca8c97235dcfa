//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// agentctlBin and agentdBin are the binaries TestMain builds, for the
// tests to run as real OS processes.
var agentctlBin, agentdBin string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "agentctl-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	agentctlBin, agentdBin = filepath.Join(dir, "agentctl"), filepath.Join(dir, "agentd")
	for bin, pkg := range map[string]string{agentctlBin: ".", agentdBin: "../agentd"} {
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build %s: %v\n%s", pkg, err, out)
			return 1
		}
	}
	return m.Run()
}
