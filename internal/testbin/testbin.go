// Package testbin builds the project's commands for tests that run them
// as real processes (a daemon paired with a hub, agentctl against it, hub
// replicas killed with SIGKILL), the way they are released: static, CGO
// off.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// module is the import path the commands live under.
const module = "github.com/devdepot-ai/agentd/cmd/"

// Temp builds the named commands into a new temporary directory and
// returns it; the caller removes it (os.RemoveAll) when done.
func Temp(names ...string) (string, error) {
	dir, err := os.MkdirTemp("", "agentd-testbin-")
	if err != nil {
		return "", err
	}
	if err := Build(dir, names...); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// Build builds the named commands of cmd/ (agentd, agentctl, agenthub)
// into dir, each as dir/NAME.
func Build(dir string, names ...string) error {
	if len(names) == 0 {
		return fmt.Errorf("testbin: no command named")
	}
	args := []string{"build", "-tags", "grpcnotrace", "-o", dir + string(filepath.Separator)}
	for _, n := range names {
		args = append(args, module+n)
	}
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %v: %w\n%s", names, err, out)
	}
	return nil
}
