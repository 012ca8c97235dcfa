package preview

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/hub/store"
)

// The sign-in hop of a private or org preview under the preview domain,
// whose host the console's cookie never reaches: the preview host sends
// the browser to AuthPagePath on the hub's own origin, which checks the
// console's session and the viewer's access and sends it back to
// AuthPath on the preview host with a one-time code; that code buys a
// cookie of the preview host alone.
const (
	// AuthPagePath is the hub's own page that signs a browser in to a
	// preview: ?token=TOKEN&return=PATH.
	AuthPagePath = "/console/preview-auth"
	// AuthPath is the preview host's path that takes the one-time code.
	AuthPath = "/.agentd-auth"
	// CodeTTL is how long a one-time code can be spent.
	CodeTTL = 60 * time.Second
	// GrantTTL bounds a preview sign-in (the exposure's end comes first
	// when sooner).
	GrantTTL = 24 * time.Hour

	grantCookie    = "agentd_preview"
	tlsGrantCookie = "__Host-agentd_preview"
	codePrefix     = "apc_"
)

// GrantCookieNames are the names of a preview host's sign-in cookie
// (plain HTTP, and TLS): never forwarded to the app.
func GrantCookieNames() []string { return []string{grantCookie, tlsGrantCookie} }

// grant is a one-time code or a preview sign-in: who, for which
// exposure, until when. Kept by its secret's hash only.
type grant struct {
	exposureID string
	viewer     Viewer
	path       string // a code's: where to go once signed in
	expires    time.Time
}

// grants holds the codes and sign-ins of the preview hosts.
type grants struct {
	mu       sync.Mutex
	codes    map[store.TokenHash]grant
	sessions map[store.TokenHash]grant
}

func (g *grants) put(m *map[store.TokenHash]grant, h store.TokenHash, gr grant, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if *m == nil {
		*m = map[store.TokenHash]grant{}
	}
	for k, v := range *m { // drop the expired, so that the maps stay small
		if !now.Before(v.expires) {
			delete(*m, k)
		}
	}
	(*m)[h] = gr
}

// spend removes and returns the code hashing to h, if live at now.
func (g *grants) spend(h store.TokenHash, now time.Time) (grant, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	gr, ok := g.codes[h]
	delete(g.codes, h)
	return gr, ok && now.Before(gr.expires)
}

func (g *grants) session(h store.TokenHash, now time.Time) (grant, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	gr, ok := g.sessions[h]
	return gr, ok && now.Before(gr.expires)
}

// allowed says whether v may see e (a private or org exposure), and if
// not the page that says why.
func allowed(v Viewer, e store.Exposure) (int, string, string) {
	switch e.Access {
	case store.AccessPublic:
		return 0, "", ""
	case store.AccessPrivate:
		if v.TokenID != "" && v.TokenID == e.CreatedBy {
			return 0, "", ""
		}
		return http.StatusForbidden, "Not yours", "This preview is private to " + e.CreatedName + "; you are signed in as " + v.Name + "."
	case store.AccessOrg:
		for _, o := range v.OrgIDs {
			if o == e.OrgID {
				return 0, "", ""
			}
		}
		return http.StatusForbidden, "Another org's preview", "This preview is open to the members of its org only; you are signed in as " + v.Name + ", who is not one."
	}
	return http.StatusForbidden, "Closed", "This preview's access is unknown."
}

// signInURL is where a browser without credentials for a preview host
// goes: the hub's AuthPagePath, with the token and the path it asked for.
// "" when the hub's own URL is unknown.
func (s *Server) signInURL(token string, r *http.Request) string {
	if s.opts.PublicURL == "" {
		return ""
	}
	q := url.Values{"token": {token}, "return": {r.URL.RequestURI()}}
	return strings.TrimSuffix(s.opts.PublicURL, "/") + AuthPagePath + "?" + q.Encode()
}

// hostGrant is the viewer of r's preview sign-in cookie for exposure e.
func (s *Server) hostGrant(r *http.Request, e store.Exposure) (Viewer, bool) {
	for _, n := range GrantCookieNames() {
		ck, err := r.Cookie(n)
		if err != nil || ck.Value == "" {
			continue
		}
		if gr, ok := s.grants.session(store.HashToken(ck.Value), s.opts.Now()); ok && gr.exposureID == e.ID {
			return gr.viewer, true
		}
	}
	return Viewer{}, false
}

// ServeAuthPage serves AuthPagePath on the hub's own origin: the console
// session r carries is checked against the exposure's access, and the
// browser goes back to the preview host with a one-time code; not signed
// in, it goes to the console's sign-in first.
func (s *Server) ServeAuthPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	token, ret := q.Get("token"), q.Get("return")
	if !strings.HasPrefix(ret, "/") || strings.HasPrefix(ret, "//") || strings.ContainsAny(ret, "\\\r\n") {
		ret = "/"
	}
	if s.domain == "" || !dnsLabel(token) {
		s.page(w, http.StatusNotFound, "Not a preview", "This sign-in link names no preview of this hub.")
		return
	}
	e, err := s.opts.Store.ExposureByToken(r.Context(), store.HashToken(token), s.opts.Now())
	if errors.Is(err, store.ErrNotFound) {
		s.page(w, http.StatusNotFound, "No such preview", "This preview URL is unknown, was unexposed, or has expired. Expose the port again with agentctl port expose.")
		return
	}
	if err != nil {
		s.opts.Logger.Warn("preview lookup", zap.Error(err))
		s.page(w, http.StatusServiceUnavailable, "Try again", "The hub could not look this preview up; try again in a moment.")
		return
	}
	v, ok, err := s.opts.Identify(r)
	if err != nil {
		s.opts.Logger.Warn("preview viewer", zap.Error(err))
		s.page(w, http.StatusServiceUnavailable, "Try again", "The hub could not check who you are; try again in a moment.")
		return
	}
	if !ok {
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, "/console/signin?"+url.Values{"next": {r.URL.RequestURI()}}.Encode(), http.StatusSeeOther)
		return
	}
	if status, title, msg := allowed(v, e); status != 0 {
		s.page(w, status, title, msg)
		return
	}
	code := codePrefix + NewToken()
	now := s.opts.Now()
	s.grants.put(&s.grants.codes, store.HashToken(code), grant{exposureID: e.ID, viewer: v, path: ret, expires: now.Add(CodeTTL)}, now)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, strings.TrimSuffix(s.URL(token), "/")+AuthPath+"?"+url.Values{"code": {code}}.Encode(), http.StatusSeeOther)
}

// serveCode serves AuthPath on a preview host: a live code of this
// exposure becomes the host's sign-in cookie and the browser goes on to
// the path it asked for, without the code in its URL.
func (s *Server) serveCode(w http.ResponseWriter, r *http.Request, e store.Exposure) {
	now := s.opts.Now()
	gr, ok := s.grants.spend(store.HashToken(r.URL.Query().Get("code")), now)
	if !ok || gr.exposureID != e.ID {
		s.page(w, http.StatusForbidden, "Sign-in link spent", "This sign-in link was used, has expired, or is another preview's. Open the preview's URL again to sign in anew.")
		return
	}
	id := NewToken()
	exp := now.Add(GrantTTL)
	if !e.ExpiresAt.IsZero() && e.ExpiresAt.Before(exp) {
		exp = e.ExpiresAt
	}
	s.grants.put(&s.grants.sessions, store.HashToken(id), grant{exposureID: e.ID, viewer: gr.viewer, expires: exp}, now)
	// Secure whenever the browser is on https, a TLS proxy in front of
	// the hub included.
	secure := s.scheme(r) == "https"
	name := grantCookie
	if secure {
		name = tlsGrantCookie
	}
	http.SetCookie(w, &http.Cookie{Name: name, Value: id, Path: "/", HttpOnly: true, Secure: secure,
		SameSite: http.SameSiteLaxMode, MaxAge: max(1, int(exp.Sub(now).Seconds()))})
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, gr.path, http.StatusSeeOther)
}
