package preview

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/wire"
)

// ViewerStore is what Identify reads: API tokens and console sessions.
type ViewerStore interface {
	TokenByHash(ctx context.Context, h store.TokenHash) (store.Token, error)
	ConsoleSession(ctx context.Context, h store.TokenHash, now time.Time) (store.ConsoleSession, error)
}

// Identify is an Options.Identify on st: a request is the API token it
// carries as a bearer, or the console session one of cookies names.
func Identify(st ViewerStore, cookies []string, now func() time.Time) func(r *http.Request) (Viewer, bool, error) {
	return func(r *http.Request) (Viewer, bool, error) {
		ctx := r.Context()
		byHash := func(h store.TokenHash) (Viewer, bool, error) {
			tok, err := st.TokenByHash(ctx, h)
			if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrRevoked) {
				return Viewer{}, false, nil
			}
			if err != nil {
				return Viewer{}, false, err
			}
			return Viewer{TokenID: tok.ID, OrgIDs: []string{tok.OrgID}, Name: tok.Name}, true, nil
		}
		if raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), wire.BearerPrefix); ok {
			h, err := store.ParseToken(strings.TrimSpace(raw))
			if err != nil {
				return Viewer{}, false, nil
			}
			return byHash(h)
		}
		for _, name := range cookies {
			ck, err := r.Cookie(name)
			if err != nil || ck.Value == "" {
				continue
			}
			sess, err := st.ConsoleSession(ctx, store.HashToken(ck.Value), now())
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return Viewer{}, false, err
			}
			if sess.TokenHash != (store.TokenHash{}) {
				return byHash(sess.TokenHash)
			}
			v := Viewer{OrgIDs: []string{sess.OrgID}, Name: sess.Name} // the owner's console link
			if sess.ActingOrgID != "" {
				v.OrgIDs = append(v.OrgIDs, sess.ActingOrgID)
			}
			return v, true, nil
		}
		return Viewer{}, false, nil
	}
}
