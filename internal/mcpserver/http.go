package mcpserver

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/devdepot-ai/agentd/internal/listen"
)

// ErrNotLoopback refuses an HTTP address other than loopback without a
// token: anyone who can reach it could run commands as the target's user.
var ErrNotLoopback = errors.New("not a loopback address")

// CheckHTTPAddr refuses addr unless its host is loopback (127.0.0.0/8,
// ::1, localhost) or a token guards it. An empty host is every interface.
func CheckHTTPAddr(addr string, haveToken bool) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("--http %q: want HOST:PORT, e.g. 127.0.0.1:8765: %w", addr, err)
	}
	if haveToken || (listen.Addr{Network: "tcp", Address: addr}).IsLoopback() {
		return nil
	}
	return fmt.Errorf("--http %q: %w; serve on 127.0.0.1:PORT, or give --http-token-file FILE whose token HTTP clients must send (Authorization: Bearer TOKEN)", addr, ErrNotLoopback)
}

// ServeHTTP serves MCP's streamable HTTP transport on lis until ctx ends.
// With a token, every request must carry "Authorization: Bearer TOKEN".
func (s *Server) ServeHTTP(ctx context.Context, lis net.Listener, token string) error {
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, nil)
	if token != "" {
		h = requireToken(token, h)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { // owned: ends when ctx does, waited for below
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			_ = srv.Close()
		}
	}()
	err := srv.Serve(lis)
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// requireToken answers 401 to a request without the bearer token.
func requireToken(token string, next http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentctl mcp"`)
			http.Error(w, "agentctl mcp: missing or wrong bearer token (Authorization: Bearer TOKEN, the token of --http-token-file)", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
