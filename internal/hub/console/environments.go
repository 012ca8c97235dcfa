package console

import (
	"net/http"
	"strings"
	"time"

	"github.com/devdepot-ai/agentd/internal/errs"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// environmentsData is the environments page's.
type environmentsData struct {
	Admin    bool
	Builtin  []*hubv1.Environment
	Images   []*hubv1.Environment
	Machines []*hubv1.Environment
	// Sandboxes are the org's sandboxes, each with a terminal to open.
	Sandboxes []*hubv1.Sandbox
	Plot      *plot
	Form      envForm
}

// envForm is the new-environment form, refilled after a refusal.
type envForm struct {
	Name, Image, Network, Isolation, Error string
}

func (c *Console) environments(w http.ResponseWriter, r *http.Request, s *session) {
	c.environmentsWith(w, r, s, http.StatusOK, envForm{Network: "public"})
}

func (c *Console) environmentsWith(w http.ResponseWriter, r *http.Request, s *session, code int, f envForm) {
	resp, err := c.opts.Backend.Environments().ListEnvironments(s.ctx, &hubv1.ListEnvironmentsRequest{})
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	d := environmentsData{Admin: s.who.Admin, Form: f}
	for _, e := range resp.GetEnvironments() {
		switch e.GetKind() {
		case hubv1.EnvironmentKind_ENVIRONMENT_KIND_BUILTIN:
			d.Builtin = append(d.Builtin, e)
		case hubv1.EnvironmentKind_ENVIRONMENT_KIND_MACHINE:
			d.Machines = append(d.Machines, e)
		default:
			d.Images = append(d.Images, e)
		}
	}
	if sbs, err := c.opts.Backend.Environments().ListSandboxes(s.ctx, &hubv1.ListSandboxesRequest{}); err == nil {
		d.Plot = sandboxStarts(sbs.GetSandboxes())
		d.Sandboxes = sbs.GetSandboxes()
	}
	c.render(w, code, c.view("environments", s, d))
}

func (c *Console) createEnvironment(w http.ResponseWriter, r *http.Request, s *session) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	f := envForm{Name: strings.TrimSpace(r.PostFormValue("name")), Image: strings.TrimSpace(r.PostFormValue("image")), Network: r.PostFormValue("network"),
		Isolation: r.PostFormValue("isolation")}
	resp, err := c.opts.Backend.Environments().CreateEnvironment(s.ctx, &hubv1.CreateEnvironmentRequest{Name: f.Name, Image: f.Image, Network: f.Network,
		Isolation: f.Isolation})
	if err != nil {
		code, msg := httpStatus(err)
		if code == http.StatusBadRequest || code == http.StatusConflict {
			f.Error = msg
			c.environmentsWith(w, r, s, code, f)
			return
		}
		c.fail(w, r, s, err)
		return
	}
	http.Redirect(w, r, Prefix+"environments/"+pathEscape(resp.GetEnvironment().GetName()), http.StatusSeeOther)
}

// environmentData is one environment's page.
type environmentData struct {
	Admin    bool
	Env      *hubv1.Environment
	Checks   []*hubv1.Check // pass and fail, in order
	Warnings []*hubv1.Check
	Now      time.Time
	// Exposures are the live previews of the environment's sandboxes.
	Exposures []Exposure
}

func (c *Console) getEnvironment(s *session, name string) (*hubv1.Environment, error) {
	resp, err := c.opts.Backend.Environments().GetEnvironment(s.ctx, &hubv1.GetEnvironmentRequest{Name: name})
	if err != nil {
		return nil, err
	}
	return resp.GetEnvironment(), nil
}

func (c *Console) environment(w http.ResponseWriter, r *http.Request, s *session) {
	e, err := c.getEnvironment(s, r.PathValue("name"))
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	d := environmentData{Admin: s.who.Admin, Env: e, Now: c.opts.Now()}
	for _, ch := range e.GetReport() {
		if ch.GetStatus() == hubv1.CheckStatus_CHECK_STATUS_WARN {
			d.Warnings = append(d.Warnings, ch)
		} else {
			d.Checks = append(d.Checks, ch)
		}
	}
	if sbs, err := c.opts.Backend.Environments().ListSandboxes(s.ctx, &hubv1.ListSandboxesRequest{Environment: e.GetName()}); err == nil && len(sbs.GetSandboxes()) > 0 {
		ids := map[string]bool{}
		for _, sb := range sbs.GetSandboxes() {
			ids[sb.GetId()] = true
		}
		if l, err := c.opts.Backend.Exposures(s.ctx); err == nil {
			d.Exposures = exposuresOf(l, ids)
		}
	}
	c.render(w, http.StatusOK, c.view("environment", s, d))
}

// environmentEvents follows a validation: its progress line as it
// changes, then "reload" when it ends.
func (c *Console) environmentEvents(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("name")
	c.stream(w, r, func(send func(event, data string) error) error {
		last := ""
		t := time.NewTicker(time.Second) // validation progress is not an activity record: look each second
		defer t.Stop()
		for {
			e, err := c.getEnvironment(s, name)
			if err != nil {
				return err
			}
			if e.GetState() != hubv1.EnvironmentState_ENVIRONMENT_STATE_VALIDATING {
				return send("reload", "")
			}
			if e.GetReason() != last {
				last = e.GetReason()
				if err := send("replace", last); err != nil {
					return err
				}
			}
			select {
			case <-r.Context().Done():
				return nil
			case <-t.C:
			}
		}
	})
}

// environmentAction runs Update, Re-validate or Make default.
func (c *Console) environmentAction(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("name")
	var err error
	env := c.opts.Backend.Environments()
	switch r.PathValue("action") {
	case "update":
		_, err = env.UpdateEnvironment(s.ctx, &hubv1.UpdateEnvironmentRequest{Name: name})
	case "revalidate":
		_, err = env.RevalidateEnvironment(s.ctx, &hubv1.RevalidateEnvironmentRequest{Name: name})
	case "default":
		_, err = env.SetDefaultEnvironment(s.ctx, &hubv1.SetDefaultEnvironmentRequest{Name: name})
	default:
		err = errs.New(errs.NotFound, "no action %q (update, revalidate, default)", r.PathValue("action"))
	}
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	if r.PathValue("action") == "default" {
		http.Redirect(w, r, Prefix+"environments", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, Prefix+"environments/"+pathEscape(name), http.StatusSeeOther)
}
