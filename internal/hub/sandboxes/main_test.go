package sandboxes

import (
	"os"
	"testing"

	"github.com/devdepot-ai/agentd/internal/hub/store/pgtest"
)

// TestMain runs one PostgreSQL cluster for the package's tests that need
// the database replicas share (see pgtest).
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
