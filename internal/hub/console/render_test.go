package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// TestRenderFetchesNothing: render draws what its handler gathered (the
// owner's org selector included) with no Backend at all.
func TestRenderFetchesNothing(t *testing.T) {
	t.Parallel()
	p, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	c := &Console{log: zaptest.NewLogger(t), pages: p} // no Backend: a fetch would panic
	w := httptest.NewRecorder()
	v := view{Page: "error", Who: &Identity{Name: "root", Org: "acme", Admin: true, Owner: true}, Orgs: []string{"acme", "beta"},
		Data: failData{Status: http.StatusNotFound, Message: "machine m-1 not found in org acme"}}
	c.render(w, http.StatusNotFound, v)
	body := w.Body.String()
	if w.Code != http.StatusNotFound {
		t.Errorf("status %d, want %d:\n%s", w.Code, http.StatusNotFound, body)
	}
	for _, want := range []string{`<select id="org-select" name="org"><option selected>acme</option><option>beta</option></select>`, "machine m-1 not found in org acme"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q:\n%s", want, body)
		}
	}
}

// TestHTTPStatusOfDomainErrors: a domain error the console or a service
// called in process returns maps as its gRPC code would.
func TestHTTPStatusOfDomainErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err  error
		code int
	}{
		{errs.New(errs.Permission, "no"), http.StatusForbidden},
		{errs.New(errs.NotFound, "no"), http.StatusNotFound},
		{errs.New(errs.Invalid, "no"), http.StatusBadRequest},
		{errs.New(errs.Exists, "no"), http.StatusConflict},
		{errs.New(errs.Precondition, "no"), http.StatusConflict},
		{errs.New(errs.Unavailable, "no"), http.StatusServiceUnavailable},
		{errs.New(errs.Unauthenticated, "no"), http.StatusUnauthorized},
		{errs.New(errs.Unknown, "no"), http.StatusInternalServerError},
	} {
		if code, msg := httpStatus(tt.err); code != tt.code || msg != "no" {
			t.Errorf("httpStatus(%v kind %v) = %d %q, want %d %q", tt.err, errs.KindOf(tt.err), code, msg, tt.code, "no")
		}
	}
}
