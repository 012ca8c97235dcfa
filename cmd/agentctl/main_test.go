//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/devdepot-ai/agentd/internal/testbin"
)

// agentctlBin and agentdBin are the binaries TestMain builds, for the
// tests to run as real OS processes.
var agentctlBin, agentdBin string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := testbin.Temp("agentctl", "agentd")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	agentctlBin, agentdBin = filepath.Join(dir, "agentctl"), filepath.Join(dir, "agentd")
	return m.Run()
}
