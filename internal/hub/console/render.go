package console

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/devdepot-ai/agentd/internal/wire"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

//go:embed templates/*
var templateFS embed.FS

// pages holds one template set per page: the layout and the page's own
// "content" (and "title").
type pages struct {
	sets map[string]*template.Template
}

var funcs = template.FuncMap{
	"ts":          fmtTime,
	"ago":         ago,
	"lower":       strings.ToLower,
	"join":        strings.Join,
	"prefix":      func() string { return Prefix },
	"status":      machineStatus,
	"uptime":      uptime,
	"outcome":     outcome,
	"hasoutput":   hasOutput,
	"dur":         func(d *durationpb.Duration) string { return d.AsDuration().Round(time.Millisecond).String() },
	"minus":       func(a, b int) int { return b - a },
	"usagekeep":   func() int { return usageKeep },
	"envs":        func(l []*hubv1.Environment, admin bool) envList { return envList{l, admin} },
	"kind":        envKind,
	"state":       envState,
	"checkstatus": checkStatus,
	"role":        func(r hubv1.Role) string { return strings.ToLower(strings.TrimPrefix(r.String(), "ROLE_")) },
}

// envList is an environments table's data.
type envList struct {
	List  []*hubv1.Environment
	Admin bool
}

func envKind(k hubv1.EnvironmentKind) string {
	return strings.ToLower(strings.TrimPrefix(k.String(), "ENVIRONMENT_KIND_"))
}

func envState(s hubv1.EnvironmentState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "ENVIRONMENT_STATE_"))
}

func checkStatus(s hubv1.CheckStatus) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "CHECK_STATUS_"))
}

// hasOutput says whether a record has an output page: a command's
// (process.*) or a routed call's record that names its process.
func hasOutput(r *agentdv1.ActivityRecord) bool {
	return r.GetObjectId() != "" && (strings.HasPrefix(r.GetKind(), wire.KindProcessPrefix) || r.GetKind() == wire.KindCall)
}

// outcome says how an operation ended, in words.
func outcome(r *agentdv1.ActivityRecord) string {
	switch r.GetKind() {
	case wire.KindProcessStart:
		return "started"
	case wire.KindProcessExit:
		return fmt.Sprintf("exit %d", r.GetExitCode())
	}
	o := strings.ToLower(strings.TrimPrefix(r.GetOutcome().String(), "OUTCOME_"))
	if o == "unspecified" {
		return ""
	}
	return o
}

func parsePages() (*pages, error) {
	names, err := templateFS.ReadDir("templates")
	if err != nil {
		return nil, err
	}
	p := &pages{sets: map[string]*template.Template{}}
	for _, n := range names {
		name := strings.TrimSuffix(n.Name(), ".html")
		if strings.HasPrefix(name, "_") {
			continue
		}
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/_*.html", path.Join("templates", n.Name()))
		if err != nil {
			return nil, fmt.Errorf("console template %s: %w", name, err)
		}
		p.sets[name] = t
	}
	return p, nil
}

// view is what the layout renders around a page.
type view struct {
	Page string    // the page's name, for the navigation's current item
	Who  *Identity // nil: not signed in
	Orgs []string  // the hub's orgs, for the owner's org selector only
	Data any
}

// view gathers what the layout shows around a page's data: who is signed
// in (s nil: nobody) and, for the hub's owner, the orgs to switch between.
// Handlers call it; render only draws what it returns.
func (c *Console) view(page string, s *session, data any) view {
	v := view{Page: page, Data: data}
	if s != nil {
		v.Who = &s.who
		v.Orgs = c.orgNames(s)
	}
	return v
}

// render writes a whole page from what its handler gathered (view); it
// fetches nothing.
func (c *Console) render(w http.ResponseWriter, code int, v view) {
	c.write(w, code, v.Page, "layout", v)
}

// fragment writes one named template of a page's set (the parts live
// pages replace) into a string.
func (c *Console) fragment(page, name string, data any) (string, error) {
	var b bytes.Buffer
	if err := c.pages.sets[page].ExecuteTemplate(&b, name, data); err != nil {
		return "", err
	}
	return b.String(), nil
}

func (c *Console) write(w http.ResponseWriter, code int, page, name string, v any) {
	var b bytes.Buffer
	set, ok := c.pages.sets[page]
	if !ok {
		http.Error(w, "no page "+page, http.StatusInternalServerError)
		return
	}
	if err := set.ExecuteTemplate(&b, name, v); err != nil {
		c.log.Error("console template", zap.String("page", page), zap.Error(err))
		http.Error(w, "the page could not be drawn", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(b.Bytes())
}

// failData is the error page's.
type failData struct {
	Status  int
	Message string
	// Back is the page to go back to, under Prefix ("": machines).
	Back, BackLabel string
}

// fail renders err (a service's status, or anything else) as a page.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, s *session, err error) {
	c.failBack(w, r, s, err, "", "")
}

// failBack is fail with a way back to the page the person came from.
func (c *Console) failBack(w http.ResponseWriter, r *http.Request, s *session, err error, back, label string) {
	code, msg := httpStatus(err)
	if code == http.StatusInternalServerError {
		c.log.Warn("console", zap.String("path", r.URL.Path), zap.Error(err))
	}
	c.render(w, code, c.view("error", s, failData{Status: code, Message: msg, Back: back, BackLabel: label}))
}

func fmtTime(t any) string {
	var tt time.Time
	switch v := t.(type) {
	case *timestamppb.Timestamp:
		if v == nil {
			return "never"
		}
		tt = v.AsTime()
	case time.Time:
		tt = v
	}
	if tt.IsZero() {
		return "never"
	}
	return tt.UTC().Format("2006-01-02 15:04:05 UTC")
}

// uptime says how long since t, in a word or two.
func uptime(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return "up " + strconv.Itoa(int(d.Seconds())) + " s"
	case d < time.Hour:
		return "up " + strconv.Itoa(int(d.Minutes())) + " min"
	case d < 48*time.Hour:
		return "up " + strconv.Itoa(int(d.Hours())) + " h"
	}
	return "up " + strconv.Itoa(int(d.Hours()/24)) + " days"
}

func ago(now time.Time, ts *timestamppb.Timestamp) string {
	if ts == nil {
		return "never"
	}
	d := now.Sub(ts.AsTime())
	switch {
	case d < 5*time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%d s ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d.Hours()))
	}
	return fmt.Sprintf("%d days ago", int(d.Hours()/24))
}
