package console

import (
	"net/http"
	"time"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// Exposure is a live preview of a port (agentctl port expose) as the
// console shows it. Its URL holds a secret the hub keeps only hashed, so
// it was shown once, to whoever exposed the port; the console names the
// exposure by ID.
type Exposure struct {
	ID         string
	Target     string // the machine or sandbox ID
	TargetName string // the machine's name; the sandbox ID for a sandbox
	Port       int
	Access     string // private, org or public
	CreatedBy  string // the name of the token that exposed it
	Created    time.Time
	Expires    time.Time // zero: until unexposed
}

// exposuresOf is the part of l whose target is one of ids (all of l
// when ids is nil).
func exposuresOf(l []Exposure, ids map[string]bool) []Exposure {
	if ids == nil {
		return l
	}
	var out []Exposure
	for _, e := range l {
		if ids[e.Target] {
			out = append(out, e)
		}
	}
	return out
}

// findExposure is one of the caller's live exposures by ID.
func (c *Console) findExposure(s *session, id string) (Exposure, error) {
	l, err := c.opts.Backend.Exposures(s.ctx)
	if err != nil {
		return Exposure{}, err
	}
	for _, e := range l {
		if e.ID == id {
			return e, nil
		}
	}
	return Exposure{}, errs.New(errs.NotFound, "no live preview %s in org %s (unexposed, or expired)", id, s.who.Org)
}

// unexposePage asks before revoking a preview: the GET changes nothing.
func (c *Console) unexposePage(w http.ResponseWriter, r *http.Request, s *session) {
	e, err := c.findExposure(s, r.PathValue("id"))
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	c.render(w, http.StatusOK, c.view("unexpose", s, e))
}

// unexpose revokes a preview, as agentctl port unexpose does, and
// returns to the machines page.
func (c *Console) unexpose(w http.ResponseWriter, r *http.Request, s *session) {
	if err := c.opts.Backend.Unexpose(s.ctx, r.PathValue("id")); err != nil {
		c.fail(w, r, s, err)
		return
	}
	http.Redirect(w, r, Prefix+"machines", http.StatusSeeOther)
}
