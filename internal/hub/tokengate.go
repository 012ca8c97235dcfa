package hub

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/devdepot-ai/agentd/internal/wire"
)

// tokenGate refuses, as its headers arrive, a call whose API token is
// missing or not one the hub knows (health checks need none). The
// authenticator checks every call again in full; for a unary call that is
// only once the request message has come, and without the gate a client
// with no valid token could hold any number of calls open with their
// headers. The gate runs on the connection's reader, so a token it has
// admitted recently is admitted again from memory: the store is read only
// for a token not seen in the last tokenGateTTL (a revoked one is still
// refused by the authenticator).
type tokenGate struct {
	auth *authenticator
	now  func() time.Time

	mu   sync.Mutex
	seen map[[sha256.Size]byte]time.Time // hash of the authorization values -> admitted until
}

func newTokenGate(auth *authenticator, now func() time.Time) *tokenGate {
	return &tokenGate{auth: auth, now: now, seen: map[[sha256.Size]byte]time.Time{}}
}

// tokenGateTTL is how long an admitted token passes the gate without a
// store read; tokenGateMax bounds how many are remembered.
const (
	tokenGateTTL = 30 * time.Second
	tokenGateMax = 10000
)

func (g *tokenGate) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if public(info.FullMethodName) {
		return ctx, nil
	}
	key := sha256.Sum256([]byte(strings.Join(info.Header.Get(wire.MDAuthorization), "\x00")))
	now := g.now()
	g.mu.Lock()
	until, ok := g.seen[key]
	g.mu.Unlock()
	if ok && now.Before(until) {
		return ctx, nil
	}
	actx, cancel := context.WithTimeout(metadata.NewIncomingContext(ctx, info.Header), 10*time.Second)
	defer cancel()
	if _, err := g.auth.authenticate(actx); err != nil {
		if status.Code(err) == codes.Unauthenticated {
			return ctx, err
		}
		return ctx, nil // the store failing: the authenticator answers for it
	}
	g.mu.Lock()
	if len(g.seen) >= tokenGateMax {
		clear(g.seen)
	}
	g.seen[key] = now.Add(tokenGateTTL)
	g.mu.Unlock()
	return ctx, nil
}

// admitHTTP is the gate for a gRPC call that net/http serves (a TLS
// client that offered http/1.1 too, see conns.Splitter): it answers a refused
// call itself, trailers-only as gRPC does, and returns false.
func (g *tokenGate) admitHTTP(w http.ResponseWriter, r *http.Request) bool {
	md := metadata.MD{}
	if v := r.Header.Values("Authorization"); len(v) > 0 {
		md[wire.MDAuthorization] = v
	}
	_, err := g.tap(r.Context(), &tap.Info{FullMethodName: r.URL.Path, Header: md})
	if err == nil {
		return true
	}
	st := status.Convert(err)
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("Grpc-Status", strconv.Itoa(int(st.Code())))
	w.Header().Set("Grpc-Message", grpcMessageEncode(st.Message()))
	w.WriteHeader(http.StatusOK)
	return false
}

// grpcMessageEncode percent-encodes a grpc-message value: every byte
// outside printable ASCII, and '%'.
func grpcMessageEncode(msg string) string {
	var b strings.Builder
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c >= ' ' && c <= '~' && c != '%' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}
