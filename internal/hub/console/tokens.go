package console

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/devdepot-ai/agentd/internal/errs"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// tokensData is the tokens page's.
type tokensData struct {
	Tokens  []*hubv1.Token
	Created *hubv1.Token // the token just made, shown once with Secret
	Secret  string
	Error   string
	Self    string // the signed-in token's name
}

func (c *Console) tokens(w http.ResponseWriter, r *http.Request, s *session) {
	c.tokensWith(w, r, s, http.StatusOK, tokensData{})
}

func (c *Console) tokensWith(w http.ResponseWriter, r *http.Request, s *session, code int, d tokensData) {
	resp, err := c.opts.Backend.Admin().ListTokens(s.ctx, &hubv1.ListTokensRequest{})
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	d.Tokens, d.Self = resp.GetTokens(), s.who.Name
	c.render(w, code, c.view("tokens", s, d))
}

// createToken makes a token and shows its secret in this response only.
func (c *Console) createToken(w http.ResponseWriter, r *http.Request, s *session) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	role, owner := hubv1.Role_ROLE_MEMBER, false
	switch r.PostFormValue("role") {
	case "admin":
		role = hubv1.Role_ROLE_ADMIN
	case "owner": // the hub refuses it but from an owner
		role, owner = hubv1.Role_ROLE_ADMIN, true
	}
	resp, err := c.opts.Backend.Admin().CreateToken(s.ctx, &hubv1.CreateTokenRequest{Name: strings.TrimSpace(r.PostFormValue("name")), Role: role, Owner: owner})
	if err != nil {
		code, msg := httpStatus(err)
		if code == http.StatusBadRequest || code == http.StatusConflict {
			c.tokensWith(w, r, s, code, tokensData{Error: msg})
			return
		}
		c.fail(w, r, s, err)
		return
	}
	c.tokensWith(w, r, s, http.StatusOK, tokensData{Created: resp.GetToken(), Secret: resp.GetSecret()})
}

// revokeTokenPage asks before revoking: the GET changes nothing.
func (c *Console) revokeTokenPage(w http.ResponseWriter, r *http.Request, s *session) {
	resp, err := c.opts.Backend.Admin().ListTokens(s.ctx, &hubv1.ListTokensRequest{})
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	id := r.PathValue("id")
	for _, t := range resp.GetTokens() {
		if t.GetId() == id && !t.GetRevoked() {
			c.render(w, http.StatusOK, c.view("token_revoke", s, t))
			return
		}
	}
	c.fail(w, r, s, errs.New(errs.NotFound, "no live token %s in org %s", id, s.who.Org))
}

func (c *Console) revokeToken(w http.ResponseWriter, r *http.Request, s *session) {
	if _, err := c.opts.Backend.Admin().RevokeToken(s.ctx, &hubv1.RevokeTokenRequest{Id: r.PathValue("id")}); err != nil {
		c.fail(w, r, s, err)
		return
	}
	http.Redirect(w, r, Prefix+"tokens", http.StatusSeeOther)
}

func pathEscape(s string) string { return url.PathEscape(s) }
