package main

import (
	"context"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/hub/store"
)

func TestConsoleLinkCmd(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "hub.db")
	if _, _, err := runAgenthub(t, "", "console-link", "--db", db, "--url", "https://hub.example.com"); err == nil || !strings.Contains(err.Error(), "agenthub init") {
		t.Errorf("console-link before init: %v, want a pointer to agenthub init", err)
	}
	if _, _, err := runAgenthub(t, "", "console-link", "--db", db, "--url", "hub.example.com"); err == nil || !strings.Contains(err.Error(), "--url") {
		t.Errorf("console-link with a bad --url: %v", err)
	}
	if _, _, err := runAgenthub(t, "", "init", "--db", db); err != nil {
		t.Fatal(err)
	}
	out, errs, err := runAgenthub(t, "", "console-link", "--db", db, "--url", "https://hub.example.com/")
	if err != nil {
		t.Fatalf("console-link: %v %s", err, errs)
	}
	u, err := url.Parse(strings.TrimSpace(out))
	if err != nil || u.Scheme != "https" || u.Host != "hub.example.com" || u.Path != "/console/link" || !strings.HasPrefix(u.Query().Get("code"), "acl_") {
		t.Fatalf("console-link printed %q", out)
	}
	// The link is stored (as a hash) in the store: it can be redeemed once.
	st, err := store.OpenSQLite(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, sid := store.NewToken()
	now := time.Now()
	sess := store.ConsoleSession{IDHash: sid, Name: "owner", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	if _, err := st.RedeemConsoleLink(t.Context(), store.HashToken(u.Query().Get("code")), now, sess); err != nil {
		t.Errorf("redeeming the printed link: %v", err)
	}
}
