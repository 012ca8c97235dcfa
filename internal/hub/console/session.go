package console

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/hub/store"
)

// Cookie names: under TLS (or behind a TLS proxy: an https PublicURL) the
// __Host- prefix (Secure, Path=/, no Domain).
const (
	cookieName    = "agenthub_console"
	tlsCookieName = "__Host-agenthub_console"
)

// Console links.
const (
	// LinkPrefix starts every console link code.
	LinkPrefix = "acl_"
	// LinkTTL is how long a console link can be used (once).
	LinkTTL = 15 * time.Minute
	// LinkSessionTTL bounds the session a console link starts.
	LinkSessionTTL = time.Hour
	// OwnerLinkName is who a console link signs in, as shown.
	OwnerLinkName = "owner (console link)"
)

// CreateLink stores a one-time console link into org orgID (the hub's
// first org: its owner's) and returns its code; the link is
// PUBLIC_URL/console/link?code=CODE.
func CreateLink(ctx context.Context, st Sessions, orgID string, now time.Time) (string, error) {
	code := newSecret(LinkPrefix)
	err := st.CreateConsoleLink(ctx, store.ConsoleLink{Hash: store.HashToken(code), OrgID: orgID, CreatedAt: now, ExpiresAt: now.Add(LinkTTL)})
	if err != nil {
		return "", err
	}
	return code, nil
}

// secure reports whether the browser is on https for r: TLS here, or a
// TLS proxy (nginx) in front of a hub whose PublicURL is https. Then the
// session cookie is Secure, so that the browser never sends it over plain
// HTTP.
func (c *Console) secure(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(c.opts.PublicURL, "https://")
}

func (c *Console) cookieFor(r *http.Request) string {
	if c.secure(r) {
		return tlsCookieName
	}
	return cookieName
}

// session is a signed-in request: the context that carries the caller to
// the hub's services, and who it is.
type session struct {
	ctx    context.Context
	who    Identity
	idHash store.TokenHash // the stored session's key
}

type sessionHandler func(w http.ResponseWriter, r *http.Request, s *session)

// auth runs h for a signed-in request; others go to the sign-in page
// (pages) or get 401 (event streams and forms).
func (c *Console) auth(h sessionHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := c.session(r)
		if err != nil {
			if !errors.Is(err, errNoSession) && !errors.Is(err, ErrSignedOut) {
				c.log.Warn("console session", zap.Error(err))
				http.Error(w, "the hub could not check your session; try again", http.StatusServiceUnavailable)
				return
			}
			c.clearCookie(w, r)
			if r.Method == http.MethodGet && !strings.HasSuffix(r.URL.Path, "/events") && !strings.HasSuffix(r.URL.Path, "/ws") {
				http.Redirect(w, r, Prefix+"signin", http.StatusSeeOther)
				return
			}
			http.Error(w, "not signed in", http.StatusUnauthorized)
			return
		}
		h(w, r, s)
	})
}

var errNoSession = errors.New("no session")

func (c *Console) session(r *http.Request) (*session, error) {
	ck, err := r.Cookie(c.cookieFor(r))
	if err != nil || ck.Value == "" {
		return nil, errNoSession
	}
	sess, err := c.opts.Sessions.ConsoleSession(r.Context(), store.HashToken(ck.Value), c.opts.Now())
	if errors.Is(err, store.ErrNotFound) {
		return nil, errNoSession
	}
	if err != nil {
		return nil, err
	}
	ctx, who, err := c.opts.Backend.As(r.Context(), sess)
	if errors.Is(err, ErrSignedOut) {
		_ = c.opts.Sessions.DeleteConsoleSession(r.Context(), sess.IDHash)
	}
	if err != nil {
		return nil, err
	}
	return &session{ctx: ctx, who: who, idHash: sess.IDHash}, nil
}

// newSecret returns 32 random bytes, base64url, after prefix.
func newSecret(prefix string) string {
	b := make([]byte, 32)
	rand.Read(b)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// setCookie gives the browser its session id, for the session's lifetime.
func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, id string) {
	http.SetCookie(w, &http.Cookie{Name: c.cookieFor(r), Value: id, Path: "/", HttpOnly: true, Secure: c.secure(r),
		SameSite: http.SameSiteStrictMode, MaxAge: int(c.opts.SessionTTL.Seconds())})
}

func (c *Console) clearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: c.cookieFor(r), Value: "", Path: "/", HttpOnly: true, Secure: c.secure(r),
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
}

func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, http.StatusOK, c.view("signin", nil, signInData{Next: nextPage(r.URL.Query().Get("next"))}))
}

type signInData struct {
	Error string
	Code  string // a console link's code, on the link page
	Next  string // where to go once signed in (a console page), "" for the machines
}

// nextPage is next if it is a page of the console's own ("" if not), so
// that a sign-in never sends the browser to another site.
func nextPage(next string) string {
	if !strings.HasPrefix(next, Prefix) || strings.ContainsAny(next, "\\\r\n") {
		return ""
	}
	return next
}

// maxForm bounds a form body.
const maxForm = 64 << 10

func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	raw := strings.TrimSpace(r.PostFormValue("token"))
	who, sess, err := c.opts.Backend.CheckToken(r.Context(), raw)
	if errors.Is(err, ErrBadToken) {
		c.render(w, http.StatusUnauthorized, c.view("signin", nil, signInData{Error: strings.TrimPrefix(err.Error(), ErrBadToken.Error()+": "), Next: nextPage(r.PostFormValue("next"))}))
		return
	}
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	id := newSecret("")
	now := c.opts.Now()
	sess.IDHash, sess.Name, sess.CreatedAt, sess.ExpiresAt = store.HashToken(id), who.Name, now, now.Add(c.opts.SessionTTL)
	if err := c.opts.Sessions.CreateConsoleSession(r.Context(), sess); err != nil {
		c.fail(w, r, nil, err)
		return
	}
	c.setCookie(w, r, id)
	to := Prefix + "machines"
	if next := nextPage(r.PostFormValue("next")); next != "" {
		to = next // say, the sign-in hop of a preview
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// linkPage asks before it spends the link: a link preview that fetches
// the page does not sign anyone in.
func (c *Console) linkPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, http.StatusOK, c.view("link", nil, signInData{Code: r.URL.Query().Get("code")}))
}

func (c *Console) redeemLink(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	code := strings.TrimSpace(r.PostFormValue("code"))
	if !strings.HasPrefix(code, LinkPrefix) {
		c.render(w, http.StatusBadRequest, c.view("signin", nil, signInData{Error: "that is not a console link; run agenthub console-link for a new one"}))
		return
	}
	id := newSecret("")
	now := c.opts.Now()
	sess := store.ConsoleSession{IDHash: store.HashToken(id), Name: OwnerLinkName, CreatedAt: now, ExpiresAt: now.Add(min(c.opts.SessionTTL, LinkSessionTTL))}
	_, err := c.opts.Sessions.RedeemConsoleLink(r.Context(), store.HashToken(code), now, sess)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrPrecondition) {
		c.render(w, http.StatusUnauthorized, c.view("signin", nil, signInData{Error: "this console link was used or has expired; run agenthub console-link for a new one"}))
		return
	}
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	c.setCookie(w, r, id)
	http.Redirect(w, r, Prefix+"machines", http.StatusSeeOther)
}

func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(c.cookieFor(r)); err == nil && ck.Value != "" {
		if err := c.opts.Sessions.DeleteConsoleSession(r.Context(), store.HashToken(ck.Value)); err != nil {
			c.fail(w, r, nil, err)
			return
		}
	}
	c.clearCookie(w, r)
	http.Redirect(w, r, Prefix+"signin", http.StatusSeeOther)
}

// CookieNames are the names of the console's session cookie (plain HTTP,
// and TLS): the preview server strips them before forwarding.
func CookieNames() []string { return []string{cookieName, tlsCookieName} }
