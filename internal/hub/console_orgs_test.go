package hub_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/hub/store/storetest"
)

// TestConsoleOwnerSwitchesOrg: the hub owner picks another org in the
// header's selector and every page then shows that org; a member of the
// owner's org and an admin of another org see no selector and the same
// POST is refused, changing nothing.
func TestConsoleOwnerSwitchesOrg(t *testing.T) {
	h := startHub(t)
	ctx := t.Context()
	beta, err := h.store.CreateOrg(ctx, "beta", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []store.Machine{
		{OrgID: h.hub.Org.ID, Name: "home-box"},
		{OrgID: beta.ID, Name: "beta-box"},
	} {
		m.Hostname, m.PublicKey, m.CreatedAt = m.Name, storetest.NewKey(t), time.Now()
		if _, err := h.store.CreateMachine(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	betaSecret, betaHash := store.NewToken()
	if _, err := h.store.CreateToken(ctx, store.Token{OrgID: beta.ID, Name: "beta-admin", Role: store.RoleAdmin, Hash: betaHash, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	memberSecret, _ := h.newToken("viewer", store.RoleMember)
	home := h.hub.Org.Name

	// shows says which of the two machines the machines page lists.
	shows := func(b *browser) string {
		t.Helper()
		p := b.get("/console/machines")
		if p.code != http.StatusOK {
			t.Fatalf("machines: %d\n%s", p.code, p.body)
		}
		var got []string
		for _, n := range []string{"home-box", "beta-box"} {
			if strings.Contains(p.body, ">"+n+"<") {
				got = append(got, n)
			}
		}
		return strings.Join(got, ",")
	}

	owner := newBrowser(t, h.url)
	owner.signIn(h.owner)
	p := owner.get("/console/machines")
	if !strings.Contains(p.body, `<select id="org-select" name="org">`) || !strings.Contains(p.body, "<option>beta</option>") {
		t.Fatalf("the owner's page has no org selector:\n%s", p.body)
	}
	checkPage(t, "machines with selector", p)
	if got := shows(owner); got != "home-box" {
		t.Fatalf("owner before switching sees %q, want home-box", got)
	}

	for _, tt := range []struct {
		name     string
		org      string
		header   []string
		wantCode int
		want     string // machines shown after
		wantOrg  string // org in the header after
	}{
		{"switch to beta", "beta", nil, http.StatusSeeOther, "beta-box", "beta"},
		{"unknown org", "gamma", nil, http.StatusNotFound, "beta-box", "beta"},
		{"cross-origin", home, []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden, "beta-box", "beta"},
		{"back home", home, nil, http.StatusSeeOther, "home-box", home},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if p := owner.post("/console/org", url.Values{"org": {tt.org}}, tt.header...); p.code != tt.wantCode {
				t.Fatalf("POST org=%s: %d, want %d\n%s", tt.org, p.code, tt.wantCode, p.body)
			}
			if got := shows(owner); got != tt.want {
				t.Errorf("machines shown: %q, want %q", got, tt.want)
			}
			p := owner.get("/console/tokens")
			if !strings.Contains(p.body, "<option selected>"+tt.wantOrg+"</option>") || !strings.Contains(p.body, " · "+tt.wantOrg+" (admin)") {
				t.Errorf("the page does not show org %s as the current one:\n%s", tt.wantOrg, p.body)
			}
			if wantTok := tt.wantOrg == "beta"; strings.Contains(p.body, "beta-admin") != wantTok {
				t.Errorf("tokens page of org %s lists beta-admin: %v", tt.wantOrg, !wantTok)
			}
		})
	}

	// A switched session stays switched: it is kept server-side.
	if p := owner.post("/console/org", url.Values{"org": {"beta"}}); p.code != http.StatusSeeOther {
		t.Fatalf("switch: %d", p.code)
	}
	if got := shows(owner); got != "beta-box" {
		t.Errorf("after switching again: %q", got)
	}
	// Other pages act in beta too: the activity filter offers beta's
	// machines, a pairing code is made for beta.
	if p := owner.get("/console/activity"); !strings.Contains(p.body, ">beta-box</option>") || strings.Contains(p.body, "home-box") {
		t.Errorf("activity page after switching to beta:\n%s", p.body)
	}
	if p := owner.post("/console/pair", nil); p.code != http.StatusOK || !strings.Contains(p.body, "Pairing code for <strong>beta</strong>") {
		t.Errorf("pairing after switching to beta: %d\n%s", p.code, p.body)
	}

	for _, tt := range []struct {
		name, secret, to, want string
	}{
		{"member of the owner's org", memberSecret, "beta", "home-box"},
		{"admin of another org", betaSecret, home, "beta-box"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := newBrowser(t, h.url)
			b.signIn(tt.secret)
			if p := b.get("/console/machines"); strings.Contains(p.body, "org-select") {
				t.Errorf("a non-owner sees the org selector:\n%s", p.body)
			}
			if p := b.post("/console/org", url.Values{"org": {tt.to}}); p.code != http.StatusForbidden {
				t.Errorf("non-owner POST org=%s: %d, want 403\n%s", tt.to, p.code, p.body)
			}
			if got := shows(b); got != tt.want {
				t.Errorf("after the refused switch sees %q, want %q", got, tt.want)
			}
		})
	}
	// The owner's own session was not touched by the refusals.
	if got := shows(owner); got != "beta-box" {
		t.Errorf("owner after others' refusals: %q", got)
	}
}
