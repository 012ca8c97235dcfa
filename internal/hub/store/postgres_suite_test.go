package store_test

import (
	"os"
	"testing"

	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/hub/store/pgtest"
	"github.com/devdepot-ai/agentd/internal/hub/store/storetest"
)

// TestMain runs one PostgreSQL cluster for the package's tests (see pgtest).
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func TestPostgresConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := store.OpenPostgres(t.Context(), pgtest.Database(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
