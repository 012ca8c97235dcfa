package ctl_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/devdepot-ai/agentd/internal/ctl"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
)

// TestAdminTokenOwner: 'admin token create --owner' makes an owner token
// (admin implied), which only an owner token may do; 'admin token ls' has an
// OWNER column and --json an "owner" field; an admin of the first org is no
// owner (cannot create orgs), and a member cannot 'sandbox rm'.
func TestAdminTokenOwner(t *testing.T) {
	t.Parallel()
	h := hubtest.Start(t, hubtest.Options{Org: "acme"}) // its token is an owner's, as agenthub init's
	owner := newHubCLI(t, h.URL, h.Token)
	alice := newHubCLI(t, h.URL, strings.TrimSpace(owner.must(t, "admin", "token", "create", "--role", "admin", "--name", "alice")))
	member := newHubCLI(t, h.URL, strings.TrimSpace(owner.must(t, "admin", "token", "create", "--name", "mallory")))
	root2 := newHubCLI(t, h.URL, strings.TrimSpace(owner.must(t, "admin", "token", "create", "--owner", "--name", "root2")))

	root2.must(t, "admin", "org", "create", "beta")
	for _, tc := range []struct {
		name string
		cli  hubCLI
		args []string
		code int
		want string
	}{
		{"admin makes an owner token", alice, []string{"admin", "token", "create", "--owner", "--name", "x"}, ctl.ExitError, "only an owner token may create another"},
		{"admin creates an org", alice, []string{"admin", "org", "create", "gamma"}, ctl.ExitError, "not an owner token"},
		{"admin names another org", alice, []string{"admin", "token", "ls", "--org", "beta"}, ctl.ExitError, "not found"},
		{"owner member token", owner, []string{"admin", "token", "create", "--owner", "--role", "member"}, ctl.ExitUsage, "--owner makes an admin token"},
		{"member sandbox rm", member, []string{"sandbox", "rm", "sb-nope"}, ctl.ExitError, "member token; this needs an admin token"},
	} {
		r := tc.cli.run(t, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
			t.Errorf("%s: %+v; want exit %d and %q", tc.name, r, tc.code, tc.want)
		}
	}

	// The table: an OWNER column.
	got := map[string]string{}
	lines := strings.Split(strings.TrimSpace(owner.must(t, "admin", "token", "ls")), "\n")
	if !strings.Contains(lines[0], "OWNER") {
		t.Errorf("token ls header %q has no OWNER column", lines[0])
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		got[f[1]] = f[3] // ID NAME ROLE OWNER …
	}
	want := map[string]string{"tester": "true", "alice": "false", "mallory": "false", "root2": "true"}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("token ls OWNER (-got +want):\n%s", diff)
	}

	// --json: "owner" on every token, false too.
	var list struct {
		Tokens []map[string]any `json:"tokens"`
	}
	if err := json.Unmarshal([]byte(owner.must(t, "--json", "admin", "token", "ls")), &list); err != nil {
		t.Fatal(err)
	}
	gotJSON := map[string]any{}
	for _, tk := range list.Tokens {
		gotJSON[tk["name"].(string)] = tk["owner"]
	}
	wantJSON := map[string]any{"tester": true, "alice": false, "mallory": false, "root2": true}
	if diff := cmp.Diff(gotJSON, wantJSON); diff != "" {
		t.Errorf("token ls --json owner (-got +want):\n%s", diff)
	}
}
