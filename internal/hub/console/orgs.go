package console

import (
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/errs"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// orgNames lists the hub's orgs for the owner's selector; nil for anyone
// else (the page then has no selector).
func (c *Console) orgNames(s *session) []string {
	if !s.who.Owner {
		return nil
	}
	resp, err := c.opts.Backend.Admin().ListOrgs(s.ctx, &hubv1.ListOrgsRequest{})
	if err != nil {
		c.log.Warn("console org list", zap.Error(err))
		return nil
	}
	names := make([]string, 0, len(resp.GetOrgs()))
	for _, o := range resp.GetOrgs() {
		names = append(names, o.GetName())
	}
	return names
}

// switchOrg makes the org named in the form the one the owner's session
// acts in (kept in the stored session); every page then shows that org.
// Anyone but the hub owner is refused and nothing changes.
func (c *Console) switchOrg(w http.ResponseWriter, r *http.Request, s *session) {
	if !s.who.Owner {
		c.fail(w, r, s, errs.New(errs.Permission, "only the hub's owner (an owner token, or agenthub console-link) can switch org"))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	name := strings.TrimSpace(r.PostFormValue("org"))
	resp, err := c.opts.Backend.Admin().ListOrgs(s.ctx, &hubv1.ListOrgsRequest{})
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	id := ""
	for _, o := range resp.GetOrgs() {
		if o.GetName() == name {
			id = o.GetId()
		}
	}
	if id == "" {
		c.fail(w, r, s, errs.New(errs.NotFound, "org %q not found", name))
		return
	}
	if err := c.opts.Sessions.SetConsoleSessionOrg(r.Context(), s.idHash, id, c.opts.Now()); err != nil {
		c.fail(w, r, s, err)
		return
	}
	http.Redirect(w, r, Prefix+"machines", http.StatusSeeOther)
}
