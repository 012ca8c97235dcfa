package nginxe2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/devdepot-ai/agentd/internal/hub/store/pgtest"
	"github.com/devdepot-ai/agentd/internal/testbin"
)

// binDir holds the agenthub, agentd and agentctl binaries TestMain builds.
var binDir string

// TestMain builds the binaries, runs one PostgreSQL cluster for the
// tests, and fails them if a goroutine outlives them.
func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	dir, err := testbin.Temp("agentd", "agentctl", "agenthub")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	code := pgtest.Main(m)
	if err := goleak.Find(); code == 0 && err != nil {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		code = 1
	}
	return code
}

func bin(name string) string { return filepath.Join(binDir, name) }
