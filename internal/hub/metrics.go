package hub

import (
	"net/http"

	"google.golang.org/grpc/metadata"

	"github.com/devdepot-ai/agentd/internal/rpcerr"
	"github.com/devdepot-ai/agentd/internal/wire"
)

// /metrics counts the calls and refusals of every org, so on the hub's
// port it is for the hub owner: a request carries the owner's API token
// (Authorization: Bearer agt_…), as a Prometheus scrape config's
// authorization.credentials does. MetricsHandler serves the same without a
// token, for a listener the operator keeps to the host (agenthub serve
// --metrics-listen 127.0.0.1:PORT).

// ownerOnly serves h to requests with a hub owner's API token: 401 without
// a valid token, 403 with another's.
func (s *Server) ownerOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := metadata.NewIncomingContext(r.Context(), metadata.Pairs(wire.MDAuthorization, r.Header.Get("Authorization")))
		c, err := s.auth.resolve(ctx)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agenthub"`)
			http.Error(w, rpcerr.Message(err), http.StatusUnauthorized)
			return
		}
		if !c.owner {
			http.Error(w, "/metrics shows every org's calls: it needs the hub owner's API token (agenthub init's), or agenthub serve --metrics-listen on loopback", http.StatusForbidden)
			return
		}
		h(w, r)
	}
}

// MetricsHandler serves /metrics without a token, for a listener only the
// hub's host reaches.
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", s.handleMetrics)
	return mux
}
