package hub_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/devdepot-ai/agentd/internal/hub/store"
)

// TestConsoleTokenRevokeConfirms: the tokens page links to a confirmation
// page; its GET changes nothing, only its same-origin POST by an admin
// revokes.
func TestConsoleTokenRevokeConfirms(t *testing.T) {
	h := startHub(t)
	_, tok := h.newToken("ci-bot", store.RoleMember)
	memberSecret, _ := h.newToken("viewer", store.RoleMember)
	admin := newBrowser(t, h.url)
	admin.signIn(h.owner)
	live := func() bool {
		t.Helper()
		ts, err := h.store.ListTokens(t.Context(), h.hub.Org.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range ts {
			if got.ID == tok.ID {
				return got.RevokedAt.IsZero()
			}
		}
		t.Fatalf("token %s is gone", tok.ID)
		return false
	}
	confirm := "/console/tokens/" + tok.ID + "/revoke"

	if p := admin.get("/console/tokens"); !strings.Contains(p.body, `href="`+confirm+`"`) || strings.Contains(p.body, `action="`+confirm+`"`) {
		t.Errorf("the tokens page should link to the confirmation, not revoke at once:\n%s", p.body)
	}
	p := admin.get(confirm)
	if p.code != http.StatusOK || !strings.Contains(p.body, "Revoke token ci-bot?") || !strings.Contains(p.body, `action="`+confirm+`"`) {
		t.Fatalf("confirmation page: %d\n%s", p.code, p.body)
	}
	checkPage(t, "token revoke", p)
	if !live() {
		t.Fatal("showing the confirmation revoked the token")
	}
	if p := admin.get("/console/tokens/nope/revoke"); p.code != http.StatusNotFound {
		t.Errorf("confirmation for an unknown token: %d, want 404", p.code)
	}

	member := newBrowser(t, h.url)
	member.signIn(memberSecret)
	if p := member.get(confirm); p.code != http.StatusForbidden {
		t.Errorf("member GET confirmation: %d, want 403", p.code)
	}
	if p := member.post(confirm, nil); p.code != http.StatusForbidden {
		t.Errorf("member POST revoke: %d, want 403", p.code)
	}
	for _, hdr := range [][]string{{"Sec-Fetch-Site", "cross-site"}, {"Sec-Fetch-Site", "", "Origin", "http://evil.example"}} {
		if p := admin.post(confirm, nil, hdr...); p.code != http.StatusForbidden {
			t.Errorf("cross-origin POST %v: %d, want 403", hdr, p.code)
		}
	}
	if !live() {
		t.Fatal("a refused POST revoked the token")
	}

	if p := admin.post(confirm, nil); p.code != http.StatusSeeOther || p.header.Get("Location") != "/console/tokens" {
		t.Fatalf("admin revoke: %d %s\n%s", p.code, p.header.Get("Location"), p.body)
	}
	if live() {
		t.Error("the confirmed POST did not revoke the token")
	}
	if p := admin.get(confirm); p.code != http.StatusNotFound {
		t.Errorf("confirmation for a revoked token: %d, want 404", p.code)
	}
}
