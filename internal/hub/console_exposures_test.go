package hub_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestConsoleExposures: the machines page lists the org's live previews
// (port, access, expiry, who) with a Revoke link to a confirmation page
// whose GET changes nothing; only its same-origin POST revokes, after
// which the URL answers 404 and the page no longer lists it; another
// org's console sees none of them.
func TestConsoleExposures(t *testing.T) {
	h, _ := startPreviewHub(t)
	m := h.startMachine(h.owner)
	app := appServer(t)
	code, out, stderr := h.agentctl(h.owner, m.id, "port", "expose", fmt.Sprint(app), "--access", "public", "--ttl", "0")
	if code != 0 {
		t.Fatalf("expose: %d %s", code, stderr)
	}
	url := strings.TrimSpace(out)
	ex, err := h.store.ListExposures(t.Context(), h.hub.Org.ID, "", time.Now())
	if err != nil || len(ex) != 1 {
		t.Fatalf("exposures: %v %v", ex, err)
	}
	id := ex[0].ID
	confirm := "/console/exposures/" + id + "/revoke"

	admin := newBrowser(t, h.url)
	admin.signIn(h.owner)
	p := admin.get("/console/machines")
	for _, want := range []string{"<td>" + id + "</td>", fmt.Sprintf("<td>%d</td>", app), "<td>public</td>", "until unexposed", ">tester ", `href="` + confirm + `"`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("machines page lacks %q:\n%s", want, p.body)
		}
	}
	checkPage(t, "machines with previews", p)
	p = admin.get(confirm)
	if p.code != http.StatusOK || !strings.Contains(p.body, "Revoke preview "+id+"?") || !strings.Contains(p.body, `action="`+confirm+`"`) {
		t.Fatalf("confirmation page: %d\n%s", p.code, p.body)
	}
	checkPage(t, "unexpose", p)
	if st, _ := get(t, url+"echo"); st != http.StatusOK {
		t.Fatalf("showing the confirmation revoked the preview: %d", st)
	}

	_, betaToken := h.otherOrg("beta")
	other := newBrowser(t, h.url)
	other.signIn(betaToken)
	if p := other.get("/console/machines"); strings.Contains(p.body, id) {
		t.Errorf("another org's console lists the preview:\n%s", p.body)
	}
	if p := other.post(confirm, nil); p.code != http.StatusNotFound {
		t.Errorf("another org's POST: %d, want 404", p.code)
	}
	for _, hdr := range [][]string{{"Sec-Fetch-Site", "cross-site"}, {"Sec-Fetch-Site", "", "Origin", "http://evil.example"}} {
		if p := admin.post(confirm, nil, hdr...); p.code != http.StatusForbidden {
			t.Errorf("cross-origin POST %v: %d, want 403", hdr, p.code)
		}
	}
	if st, _ := get(t, url+"echo"); st != http.StatusOK {
		t.Fatalf("a refused POST revoked the preview: %d", st)
	}

	if p := admin.post(confirm, nil); p.code != http.StatusSeeOther || p.header.Get("Location") != "/console/machines" {
		t.Fatalf("revoke: %d %s\n%s", p.code, p.header.Get("Location"), p.body)
	}
	if st, _ := get(t, url+"echo"); st != http.StatusNotFound {
		t.Errorf("after the console's revoke the URL answers %d, want 404", st)
	}
	if p := admin.get("/console/machines"); strings.Contains(p.body, id) {
		t.Errorf("the machines page still lists the revoked preview")
	}
	if p := admin.get(confirm); p.code != http.StatusNotFound {
		t.Errorf("confirmation for a revoked preview: %d, want 404", p.code)
	}
}
