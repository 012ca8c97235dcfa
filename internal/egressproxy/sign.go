package egressproxy

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// The headers of a sandbox's CONNECT on the hub's socket.
const (
	HeaderSandbox   = "Agentd-Sandbox"
	HeaderTime      = "Agentd-Egress-Time"      // unix seconds
	HeaderSignature = "Agentd-Egress-Signature" // base64 (raw URL) Ed25519 signature
)

// MaxSkew is how far a request's time may be from the hub's.
const MaxSkew = time.Minute

// ErrUnauthenticated: the request does not prove a sandbox.
var ErrUnauthenticated = errors.New("egress request not authenticated")

// message is what a sandbox signs for one connection.
func message(id, target string, unix int64) []byte {
	return []byte("agentd-egress-v1|" + id + "|" + target + "|" + strconv.FormatInt(unix, 10))
}

// sign sets the headers that prove the request comes from sandbox id.
func sign(h http.Header, id, target string, key ed25519.PrivateKey, now time.Time) {
	t := now.Unix()
	h.Set(HeaderSandbox, id)
	h.Set(HeaderTime, strconv.FormatInt(t, 10))
	h.Set(HeaderSignature, base64.RawURLEncoding.EncodeToString(ed25519.Sign(key, message(id, target, t))))
}

// verify checks the headers of a CONNECT to target against the sandbox's
// public key (found by keyOf from the id) and the time now.
func verify(h http.Header, target string, now time.Time, key ed25519.PublicKey) error {
	id := h.Get(HeaderSandbox)
	t, err := strconv.ParseInt(h.Get(HeaderTime), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s is not a number", ErrUnauthenticated, HeaderTime)
	}
	if d := now.Sub(time.Unix(t, 0)); d > MaxSkew || d < -MaxSkew {
		return fmt.Errorf("%w: its time is %s off the hub's", ErrUnauthenticated, d.Round(time.Second))
	}
	sig, err := base64.RawURLEncoding.DecodeString(h.Get(HeaderSignature))
	if err != nil || len(key) != ed25519.PublicKeySize || !ed25519.Verify(key, message(id, target, t), sig) {
		return fmt.Errorf("%w: bad signature", ErrUnauthenticated)
	}
	return nil
}
