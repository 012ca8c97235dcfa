package ctl_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/ctl"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/wire"
)

// hubCLI runs agentctl in-process against a real hub with one token.
type hubCLI struct {
	url, tokenFile string
}

func newHubCLI(t *testing.T, url, token string) hubCLI {
	t.Helper()
	f := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	return hubCLI{url: url, tokenFile: f}
}

func (h hubCLI) run(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := ctl.Main(t.Context(), append([]string{"--hub", h.url, "--token-file", h.tokenFile}, args...), ctl.IO{
		In: strings.NewReader(""), Out: &out, Err: &errb,
	})
	return result{code, out.String(), errb.String()}
}

// must runs args and fails the test unless they exit 0; it returns stdout.
func (h hubCLI) must(t *testing.T, args ...string) string {
	t.Helper()
	r := h.run(t, args...)
	if r.code != 0 {
		t.Fatalf("agentctl %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// machines returns the status of each machine `agentctl --json machines
// args...` lists, by id.
func (h hubCLI) machines(t *testing.T, args ...string) map[string]string {
	t.Helper()
	var resp struct {
		Machines []struct{ ID, Status string } `json:"machines"`
	}
	if err := json.Unmarshal([]byte(h.must(t, append([]string{"--json", "machines"}, args...)...)), &resp); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range resp.Machines {
		got[m.ID] = strings.TrimPrefix(m.Status, "MACHINE_STATUS_")
	}
	return got
}

// pairMachine pairs a new machine with code over the hub's HTTP pairing
// endpoint and returns its id.
func pairMachine(t *testing.T, hubURL, code, name string) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(wire.PairRequest{Code: code, PublicKey: pub, Hostname: name, OS: "linux", Arch: "amd64", Name: name})
	resp, err := http.Post(hubURL+"/v1/pair", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var pr struct {
		MachineID string `json:"machine_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&pr); err != nil || resp.StatusCode != http.StatusOK || pr.MachineID == "" {
		t.Fatalf("pair %s: HTTP %d, %v, %+v", name, resp.StatusCode, err, pr)
	}
	return pr.MachineID
}

// TestOwnerActsInAnyOrg: with the hub owner's token, machines, admin revoke
// and admin token revoke act in the org --org names; without it, in the
// owner's own org, where another org's machine or token is not found. An
// admin of another org cannot reach the owner's org with --org.
func TestOwnerActsInAnyOrg(t *testing.T) {
	t.Parallel()
	h := hubtest.Start(t, hubtest.Options{Org: "acme"}) // the first org: its admin token is the owner's
	owner := newHubCLI(t, h.URL, h.Token)

	owner.must(t, "admin", "org", "create", "beta")
	acmeMachine := pairMachine(t, h.URL, strings.TrimSpace(owner.must(t, "admin", "pair-code", "create")), "acme-box")
	betaMachine := pairMachine(t, h.URL, strings.TrimSpace(owner.must(t, "admin", "pair-code", "create", "--org", "beta")), "beta-box")
	beta := newHubCLI(t, h.URL, strings.TrimSpace(owner.must(t, "admin", "token", "create", "--org", "beta", "--role", "admin", "--name", "beta-admin")))

	// Listing: each org sees its own; the owner sees beta's with --org.
	if got := owner.machines(t); !has(got, acmeMachine) || has(got, betaMachine) {
		t.Errorf("owner's machines = %v, want %s and not %s", got, acmeMachine, betaMachine)
	}
	if got := owner.machines(t, "--org", "beta"); !has(got, betaMachine) || has(got, acmeMachine) {
		t.Errorf("owner's machines --org beta = %v, want %s only", got, betaMachine)
	}
	if got := beta.machines(t); !has(got, betaMachine) || has(got, acmeMachine) {
		t.Errorf("beta admin's machines = %v, want %s only", got, betaMachine)
	}
	if r := beta.run(t, "machines", "--org", "acme"); r.code != ctl.ExitError || !strings.Contains(r.stderr, "not found") {
		t.Errorf("beta admin's machines --org acme: %+v; want exit 1, not found", r)
	}

	// Revoking a machine: not found in the owner's org, revoked with --org.
	if r := owner.run(t, "admin", "revoke", betaMachine); r.code != ctl.ExitError || !strings.Contains(r.stderr, "not found in org acme") {
		t.Errorf("owner's admin revoke %s (no --org): %+v; want exit 1, not found in org acme", betaMachine, r)
	}
	if r := beta.run(t, "admin", "revoke", acmeMachine, "--org", "acme"); r.code != ctl.ExitError || !strings.Contains(r.stderr, "not found") {
		t.Errorf("beta admin's admin revoke %s --org acme: %+v; want exit 1, not found", acmeMachine, r)
	}
	owner.must(t, "admin", "revoke", betaMachine, "--org", "beta")
	if got := owner.machines(t, "--org", "beta")[betaMachine]; got != "REVOKED" {
		t.Errorf("after admin revoke --org beta, %s is %q, want REVOKED", betaMachine, got)
	}
	if got := owner.machines(t)[acmeMachine]; got == "REVOKED" {
		t.Errorf("%s of org acme was revoked too", acmeMachine)
	}

	// Revoking a token: the same.
	var tok struct {
		Token struct{ ID string } `json:"token"`
	}
	if err := json.Unmarshal([]byte(owner.must(t, "--json", "admin", "token", "create", "--org", "beta", "--name", "member")), &tok); err != nil || tok.Token.ID == "" {
		t.Fatalf("token create --json: %v, %+v", err, tok)
	}
	if r := owner.run(t, "admin", "token", "revoke", tok.Token.ID); r.code != ctl.ExitError || !strings.Contains(r.stderr, "not found") {
		t.Errorf("owner's admin token revoke (no --org): %+v; want exit 1, not found", r)
	}
	owner.must(t, "admin", "token", "revoke", tok.Token.ID, "--org", "beta")
	type tokenRow struct {
		ID      string
		Revoked bool
	}
	var list struct {
		Tokens []tokenRow `json:"tokens"`
	}
	if err := json.Unmarshal([]byte(owner.must(t, "--json", "admin", "token", "list", "--org", "beta")), &list); err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(list.Tokens, func(x tokenRow) bool { return x.ID == tok.Token.ID }); i < 0 || !list.Tokens[i].Revoked {
		t.Errorf("after token revoke --org beta, beta's tokens = %+v, want %s revoked", list.Tokens, tok.Token.ID)
	}
}

func has(m map[string]string, k string) bool { _, ok := m[k]; return ok }

// TestOwnerActivityAndSandboxRmInAnyOrg: activity and sandbox rm take --org
// like machines: the owner reads and acts in another org with it, an admin
// of another org cannot.
func TestOwnerActivityAndSandboxRmInAnyOrg(t *testing.T) {
	t.Parallel()
	h := hubtest.Start(t, hubtest.Options{Org: "acme"})
	owner := newHubCLI(t, h.URL, h.Token)
	owner.must(t, "admin", "org", "create", "beta")
	acmeMachine := pairMachine(t, h.URL, strings.TrimSpace(owner.must(t, "admin", "pair-code", "create")), "acme-box")
	betaMachine := pairMachine(t, h.URL, strings.TrimSpace(owner.must(t, "admin", "pair-code", "create", "--org", "beta")), "beta-box")
	beta := newHubCLI(t, h.URL, strings.TrimSpace(owner.must(t, "admin", "token", "create", "--org", "beta", "--role", "admin", "--name", "beta-admin")))
	for _, m := range []struct{ id, summary string }{{acmeMachine, "stat /acme-only"}, {betaMachine, "stat /beta-only"}} {
		rec := fmt.Appendf(nil, `{"seq":1,"kind":"files.stat","summary":%q,"outcome":"OUTCOME_OK"}`, m.summary)
		if err := h.Store.AppendActivity(t.Context(), m.id, []store.Activity{{Seq: 1, Time: time.Now(), Record: rec}}); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		name      string
		cli       hubCLI
		args      []string
		want, not string // in stdout, never in stdout
		wantErr   string // in stderr, with exit 1
	}{
		{"owner: own org", owner, []string{"activity"}, "/acme-only", "/beta-only", ""},
		{"owner: --org beta", owner, []string{"activity", "--org", "beta"}, "/beta-only", "/acme-only", ""},
		{"owner: --org beta, one machine", owner, []string{"activity", "--org", "beta", "--machine", betaMachine}, "beta-box", "/acme-only", ""},
		{"owner: beta's machine without --org", owner, []string{"activity", "--machine", betaMachine}, "", "", "not found in org acme"},
		{"owner: --org nosuch", owner, []string{"activity", "--org", "nosuch"}, "", "", "not found"},
		{"beta admin: own org", beta, []string{"activity"}, "/beta-only", "/acme-only", ""},
		{"beta admin: --org acme", beta, []string{"activity", "--org", "acme"}, "", "", "org acme not found"},
		{"owner: --tail 0", owner, []string{"activity", "--org", "beta", "--tail", "0"}, "", "/beta-only", ""},

		// No sandboxes run on this hub: an org --org may name gets as far
		// as that answer, one it may not is not found.
		{"owner: sandbox rm --org beta", owner, []string{"sandbox", "rm", "sb-1", "--org", "beta"}, "", "", "this hub runs no sandboxes"},
		{"owner: sandbox rm --org nosuch", owner, []string{"sandbox", "rm", "sb-1", "--org", "nosuch"}, "", "", "org nosuch not found"},
		{"beta admin: sandbox rm --org acme", beta, []string{"sandbox", "rm", "sb-1", "--org", "acme"}, "", "", "org acme not found"},
		{"beta admin: sandbox rm --org acme, two ids", beta, []string{"sandbox", "rm", "sb-1", "sb-2", "--org", "acme"}, "", "", "sb-2: org acme not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.cli.run(t, tt.args...)
			if tt.wantErr != "" {
				if r.code != ctl.ExitError || !strings.Contains(r.stderr, tt.wantErr) {
					t.Errorf("agentctl %s: %+v; want exit 1 and %q", strings.Join(tt.args, " "), r, tt.wantErr)
				}
				return
			}
			if r.code != 0 || !strings.Contains(r.stdout, tt.want) || (tt.not != "" && strings.Contains(r.stdout, tt.not)) {
				t.Errorf("agentctl %s: %+v; want exit 0, %q and not %q", strings.Join(tt.args, " "), r, tt.want, tt.not)
			}
		})
	}
}
