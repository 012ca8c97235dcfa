package hub_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/internal/hub/store"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// TestOwnerIsAToken: ownership of the hub is a property of a token, not of
// the first org. Another admin token of the first org cannot create or see
// other orgs, make an owner token or revoke the owner's; an owner token
// (the one the hub started with, as agenthub init makes, or one made with
// --owner, in any org) can; token lists say which tokens are owners.
func TestOwnerIsAToken(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	admin := hubv1.NewAdminServiceClient(h.conn())
	as := func(tok string) context.Context { return authCtx(t.Context(), tok, "") }
	mk := func(by string, req *hubv1.CreateTokenRequest) (*hubv1.CreateTokenResponse, error) {
		return admin.CreateToken(as(by), req)
	}
	if _, err := admin.CreateOrg(as(h.owner), &hubv1.CreateOrgRequest{Name: "beta"}); err != nil {
		t.Fatalf("the init token creates an org: %v", err)
	}
	alice, err := mk(h.owner, &hubv1.CreateTokenRequest{Name: "alice", Role: hubv1.Role_ROLE_ADMIN})
	if err != nil {
		t.Fatal(err)
	}
	aliceTok := alice.GetSecret()

	// An admin of the first org is just an admin of that org.
	refusals := []struct {
		name string
		err  error
		want codes.Code
	}{
		{"create org", second(admin.CreateOrg(as(aliceTok), &hubv1.CreateOrgRequest{Name: "gamma"})), codes.PermissionDenied},
		{"list another org's tokens", second(admin.ListTokens(as(aliceTok), &hubv1.ListTokensRequest{Org: "beta"})), codes.NotFound},
		{"token in another org", second(mk(aliceTok, &hubv1.CreateTokenRequest{Org: "beta", Name: "x", Role: hubv1.Role_ROLE_ADMIN})), codes.NotFound},
		{"owner token", second(mk(aliceTok, &hubv1.CreateTokenRequest{Name: "root2", Owner: true})), codes.PermissionDenied},
		{"owner member token", second(mk(h.owner, &hubv1.CreateTokenRequest{Name: "odd", Owner: true, Role: hubv1.Role_ROLE_MEMBER})), codes.InvalidArgument},
	}
	for _, r := range refusals {
		if status.Code(r.err) != r.want {
			t.Errorf("%s by an admin of the first org: %v, want %v", r.name, r.err, r.want)
		}
	}
	if err := refusals[0].err; !strings.Contains(status.Convert(err).Message(), "--owner") {
		t.Errorf("the refusal should say how to get an owner token: %v", err)
	}
	orgs, err := admin.ListOrgs(as(aliceTok), &hubv1.ListOrgsRequest{})
	if err != nil || len(orgs.GetOrgs()) != 1 || orgs.GetOrgs()[0].GetName() != h.hub.Org.Name {
		t.Errorf("an admin of the first org lists orgs %v (%v), want only its own", orgs.GetOrgs(), err)
	}
	ownerID := ""
	for _, tk := range mustList(t, admin, as(h.owner), "") {
		if tk.GetOwner() {
			ownerID = tk.GetId()
		}
	}
	if _, err := admin.RevokeToken(as(aliceTok), &hubv1.RevokeTokenRequest{Id: ownerID}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("an admin revoking the owner's token: %v, want PermissionDenied", err)
	}

	// An owner token made with --owner (admin implied), here in another
	// org, acts for the owner everywhere.
	root2, err := mk(h.owner, &hubv1.CreateTokenRequest{Org: "beta", Name: "root2", Owner: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := root2.GetToken(); !got.GetOwner() || got.GetRole() != hubv1.Role_ROLE_ADMIN {
		t.Errorf("--owner made %v, want an admin owner token", got)
	}
	if _, err := admin.CreateOrg(as(root2.GetSecret()), &hubv1.CreateOrgRequest{Name: "gamma"}); err != nil {
		t.Errorf("the --owner token creates an org: %v", err)
	}
	if _, err := admin.ListTokens(as(root2.GetSecret()), &hubv1.ListTokensRequest{Org: h.hub.Org.Name}); err != nil {
		t.Errorf("the --owner token lists the first org's tokens: %v", err)
	}

	// token ls says who is an owner.
	got := map[string]bool{}
	for _, tk := range mustList(t, admin, as(h.owner), "") {
		got[tk.GetName()] = tk.GetOwner()
	}
	for _, tk := range mustList(t, admin, as(h.owner), "beta") {
		got[tk.GetName()] = tk.GetOwner()
	}
	if diff := cmp.Diff(got, map[string]bool{"tester": true, "alice": false, "root2": true}); diff != "" {
		t.Errorf("owners in token lists (-got +want):\n%s", diff)
	}
	// The hub keeps an owner: the last live owner token cannot be revoked.
	if _, err := admin.RevokeToken(as(h.owner), &hubv1.RevokeTokenRequest{Org: "beta", Id: root2.GetToken().GetId()}); err != nil {
		t.Errorf("the owner revoking another owner token: %v", err)
	}
	_, err = admin.RevokeToken(as(h.owner), &hubv1.RevokeTokenRequest{Id: ownerID})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "last owner token") {
		t.Errorf("revoking the last owner token: %v, want FailedPrecondition", err)
	}
	if _, err := admin.ListOrgs(as(h.owner), &hubv1.ListOrgsRequest{}); err != nil {
		t.Errorf("the refused revocation revoked the owner's token: %v", err)
	}
}

func mustList(t *testing.T, admin hubv1.AdminServiceClient, ctx context.Context, org string) []*hubv1.Token {
	t.Helper()
	resp, err := admin.ListTokens(ctx, &hubv1.ListTokensRequest{Org: org})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetTokens()
}

func second[T any](_ T, err error) error { return err }

// TestConsoleOwnerIsAToken: the tokens page says which tokens are owners,
// and an admin of the first org who is no owner gets no org selector and
// cannot switch org.
func TestConsoleOwnerIsAToken(t *testing.T) {
	h := startHub(t)
	ctx := t.Context()
	if _, err := h.store.CreateOrg(ctx, "beta", time.Now()); err != nil {
		t.Fatal(err)
	}
	aliceSecret, _ := h.newToken("alice", store.RoleAdmin)
	owner := newBrowser(t, h.url)
	owner.signIn(h.owner)
	p := owner.get("/console/tokens")
	if !strings.Contains(p.body, "<td>tester</td><td>admin, owner</td>") || !strings.Contains(p.body, "<td>alice</td><td>admin</td>") {
		t.Errorf("the tokens page should mark tester (only) as owner:\n%s", p.body)
	}
	checkPage(t, "tokens with an owner", p)

	alice := newBrowser(t, h.url)
	alice.signIn(aliceSecret)
	if p := alice.get("/console/machines"); strings.Contains(p.body, `id="org-select"`) {
		t.Errorf("an admin of the first org who is no owner has the org selector:\n%s", p.body)
	}
	if p := alice.post("/console/org", url.Values{"org": {"beta"}}); p.code != http.StatusForbidden {
		t.Errorf("an admin of the first org switching org: %d, want 403", p.code)
	}
	// Only an owner is offered, and may make, an owner token.
	if strings.Contains(alice.get("/console/tokens").body, `value="owner"`) {
		t.Error("an admin who is no owner is offered owner tokens")
	}
	if p := alice.post("/console/tokens", url.Values{"name": {"sneaky"}, "role": {"owner"}}); p.code != http.StatusForbidden {
		t.Errorf("an admin who is no owner making an owner token: %d, want 403\n%s", p.code, p.body)
	}
	if !strings.Contains(owner.get("/console/tokens").body, `value="owner"`) {
		t.Error("the owner is not offered owner tokens")
	}
	if p := owner.post("/console/tokens", url.Values{"name": {"root2"}, "role": {"owner"}}); p.code != http.StatusOK || !strings.Contains(p.body, "(admin, owner) was created") {
		t.Errorf("the owner making an owner token: %d\n%s", p.code, p.body)
	}
	owners := map[string]bool{}
	ts, err := h.store.ListTokens(ctx, h.hub.Org.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range ts {
		owners[tk.Name] = tk.Owner
	}
	if diff := cmp.Diff(owners, map[string]bool{"tester": true, "alice": false, "root2": true}); diff != "" {
		t.Errorf("tokens after the console's creations (-got +want):\n%s", diff)
	}
}
