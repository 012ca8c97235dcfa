package agentd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"os/user"
	"strconv"
	"strings"
	"unicode"

	"go.uber.org/zap"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// Who asked for an operation — the actor of its activity record — is
// decided per listener, never by what a call says about itself. The hub
// authenticates the caller's API token and sets the agentd-actor metadata
// itself, dropping what the caller sent: on the tunnel (a hubListener) the
// daemon records that actor. On any other listener (the local socket,
// `agentd serve`'s port) the metadata is only the caller's word: the actor
// is what the connection proves (the peer's uid on a unix socket, the
// bearer token on TCP), and the caller's claim is kept beside it, labelled.

// hubListener marks the listener of the tunnel to the hub (Run wraps its
// transport.Tunnel in it): its connections come from the hub, whose
// agentd-actor metadata the daemon trusts.
type hubListener struct{ net.Listener }

func (l hubListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return hubConn{c}, nil
}

// hubConn is a connection accepted on a hubListener.
type hubConn struct{ net.Conn }

// caller is the credentials.AuthInfo of a connection: who is at the other
// end. Handlers reach it with peer.FromContext.
type caller struct {
	credentials.CommonAuthInfo
	// hub is set on the tunnel: the actor is the agentd-actor metadata.
	hub bool
	// actor is, off the tunnel, who the connection proves the peer is.
	actor string
}

// AuthType implements credentials.AuthInfo.
func (caller) AuthType() string { return "agentd-peer" }

// peerCreds are the server's transport credentials: no encryption (the
// local socket is private; the tunnel runs in the hub's TLS), only a
// handshake that names the peer of each connection (see caller).
type peerCreds struct {
	// tokenActor names the callers who presented the daemon's bearer
	// token ("token:" and the start of its SHA-256); empty without one.
	tokenActor string
	log        *zap.Logger
}

var _ credentials.TransportCredentials = peerCreds{}

func newPeerCreds(token string, log *zap.Logger) peerCreds {
	c := peerCreds{log: log}
	if token != "" {
		sum := sha256.Sum256([]byte(token))
		c.tokenActor = "token:" + hex.EncodeToString(sum[:4])
	}
	return c
}

// ServerHandshake names the peer of raw; it exchanges nothing.
func (c peerCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return raw, c.identify(raw), nil
}

func (c peerCreds) identify(conn net.Conn) caller {
	switch conn := conn.(type) {
	case hubConn:
		return caller{hub: true}
	case *net.UnixConn:
		uid, err := peerUID(conn)
		if err == nil {
			return caller{actor: uidActor(uid)}
		}
		level := zap.WarnLevel
		if errors.Is(err, errors.ErrUnsupported) {
			level = zap.DebugLevel // expected on this system, every connection
		}
		c.log.Log(level, "cannot tell who is on the local socket; the audit log names the token or the address", zap.Error(err))
	}
	if c.tokenActor != "" { // every call must present the token (authorize)
		return caller{actor: c.tokenActor}
	}
	addr := conn.RemoteAddr()
	if addr == nil || addr.String() == "" {
		return caller{actor: "unknown"}
	}
	return caller{actor: addr.Network() + ":" + addr.String()}
}

// uidActor renders a uid as "uid:1000(alice)", or "uid:1000" when the
// user database has no name for it.
func uidActor(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil && u.Username != "" {
		return "uid:" + id + "(" + u.Username + ")"
	}
	return "uid:" + id
}

// ClientHandshake fails: the daemon dials nothing with these credentials.
func (peerCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("agentd: peer credentials are for the server only")
}

// Info implements credentials.TransportCredentials.
func (peerCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "agentd-peer"}
}

// Clone implements credentials.TransportCredentials.
func (c peerCreds) Clone() credentials.TransportCredentials { return c }

// OverrideServerName implements credentials.TransportCredentials.
func (peerCreds) OverrideServerName(string) error { return nil }

// maxClaim bounds the recorded claim of a direct caller.
const maxClaim = 128

// actorOf returns who asked for the call in ctx and, on a direct
// connection, the actor the caller claimed (its agentd-actor metadata)
// when that is not the same. A call whose connection was not named (none
// should be) gets no actor: its claim stays a claim.
func actorOf(ctx context.Context, claimed string) (actor, claim string) {
	var c caller
	if p, ok := peer.FromContext(ctx); ok {
		c, _ = p.AuthInfo.(caller)
	}
	switch {
	case c.hub:
		return claimed, ""
	case claimed == c.actor:
		return c.actor, ""
	}
	return c.actor, cleanClaim(claimed)
}

// cleanClaim makes an unchecked claim safe to print on one line: control
// characters become '?', and it is cut to maxClaim bytes.
func cleanClaim(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
	if len(s) > maxClaim {
		s = strings.ToValidUTF8(s[:maxClaim], "") + "…"
	}
	return s
}
