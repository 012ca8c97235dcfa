package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/devdepot-ai/agentd/internal/hub/store"
)

// TestInitTokenIsOwner: the token agenthub init prints is an owner token
// (ownership is the token's, not its org's).
func TestInitTokenIsOwner(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "hub.db")
	out, errs, err := runAgenthub(t, "", "init", "--db", db)
	if err != nil {
		t.Fatalf("init: %v %s", err, errs)
	}
	st, err := store.OpenSQLite(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	hash, err := store.ParseToken(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("init printed %q: %v", out, err)
	}
	tok, err := st.TokenByHash(context.Background(), hash)
	if err != nil {
		t.Fatal(err)
	}
	if !tok.Owner || tok.Role != store.RoleAdmin {
		t.Errorf("init's token: %+v; want an admin owner token", tok)
	}
}
