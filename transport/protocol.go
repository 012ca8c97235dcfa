package transport

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
	"unicode/utf8"
)

// Wire constants of the tunnel protocol.
const (
	// Subprotocol is the websocket subprotocol both sides must agree on.
	Subprotocol = "agentd.tunnel.v1"
	// Path is where the hub serves the tunnel.
	Path = "/v1/tunnel"
	// HeaderMachine carries the daemon's machine id on the upgrade request.
	HeaderMachine = "Agentd-Machine"

	signaturePrefix = "agentd-tunnel-v1"
	// maxHandshakeMessage bounds every handshake message; the real ones are
	// a few hundred bytes.
	maxHandshakeMessage = 4 << 10
	nonceBytes          = 32
	maxMachineID        = 128
)

// Reason says, in a word a program can match, why the hub refused a tunnel.
type Reason string

// Reasons the hub gives.
const (
	ReasonUnknownMachine Reason = "unknown_machine" // no machine with this id
	ReasonRevoked        Reason = "revoked"         // the machine was removed from its org
	ReasonBadSignature   Reason = "bad_signature"   // the signature does not match the machine's key
	ReasonExpired        Reason = "expired"         // the answer came after the nonce expired
	ReasonReplayed       Reason = "replayed"        // the answer names a nonce other than the one just issued
	ReasonWrongHost      Reason = "wrong_host"      // the daemon signed for another host name
	ReasonBadRequest     Reason = "bad_request"     // the answer was malformed
	ReasonUnavailable    Reason = "unavailable"     // the hub could not check the machine right now
	ReasonWrongEndpoint  Reason = "wrong_endpoint"  // this id opens its tunnel through another of the hub's endpoints
)

// Sentinel errors, matched with errors.Is. A hub's Authenticate returns
// ErrUnknownMachine, ErrRevoked or ErrWrongEndpoint; a daemon's Status.Err matches the one
// that goes with the hub's rejection (a *RejectedError).
var (
	ErrUnknownMachine = errors.New("unknown machine")
	ErrRevoked        = errors.New("machine revoked")
	ErrBadSignature   = errors.New("bad signature")
	ErrExpired        = errors.New("challenge expired")
	ErrReplayed       = errors.New("replayed challenge response")
	ErrWrongHost      = errors.New("signed for another hub host")
	ErrBadRequest     = errors.New("malformed handshake")
	ErrUnavailable    = errors.New("hub unavailable")
	// ErrWrongEndpoint refuses an id this acceptor does not take at all,
	// whatever its key: a sandbox's id anywhere but on the sandboxes'
	// socket, a machine's id there. Authenticate wraps it with the
	// explanation the daemon is sent.
	ErrWrongEndpoint = errors.New("id not accepted on this endpoint")
)

var reasonErrs = map[Reason]error{
	ReasonUnknownMachine: ErrUnknownMachine,
	ReasonRevoked:        ErrRevoked,
	ReasonBadSignature:   ErrBadSignature,
	ReasonExpired:        ErrExpired,
	ReasonReplayed:       ErrReplayed,
	ReasonWrongHost:      ErrWrongHost,
	ReasonBadRequest:     ErrBadRequest,
	ReasonUnavailable:    ErrUnavailable,
	ReasonWrongEndpoint:  ErrWrongEndpoint,
}

// permanent reports whether retrying soon cannot help: the machine has to be
// paired again (or the hub's configuration fixed), so the daemon retries slowly.
func (r Reason) permanent() bool {
	switch r {
	case ReasonUnknownMachine, ReasonRevoked, ReasonBadSignature, ReasonWrongHost, ReasonBadRequest, ReasonWrongEndpoint:
		return true
	}
	return false
}

// RejectedError is the hub's refusal of a tunnel, as the daemon sees it.
type RejectedError struct {
	Reason    Reason
	Org       string // the org that removed the machine (ReasonRevoked only)
	MachineID string
	Message   string // the hub's explanation, if any
}

// Error says what happened and what to do, in plain words.
func (e *RejectedError) Error() string {
	switch e.Reason {
	case ReasonRevoked:
		if e.Org != "" {
			return fmt.Sprintf("this machine was removed from org %s; run agentd pair again", e.Org)
		}
		return "this machine was removed from its org; run agentd pair again"
	case ReasonUnknownMachine:
		return fmt.Sprintf("the hub does not know this machine (id %s); run agentd pair again", e.MachineID)
	case ReasonBadSignature:
		return "the hub does not accept this machine's key (it is not the key that was paired); run agentd pair again"
	}
	msg := "the hub refused the tunnel (" + string(e.Reason) + ")"
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Is matches the sentinel error that goes with the reason.
func (e *RejectedError) Is(target error) bool {
	s, ok := reasonErrs[e.Reason]
	return ok && s == target
}

const (
	msgChallenge = "challenge"
	msgResponse  = "response"
	msgOK        = "ok"
	msgRejected  = "rejected"
)

// message is every handshake message; Type says which fields are used.
type message struct {
	Type      string    `json:"type"`
	Nonce     string    `json:"nonce,omitempty"`     // challenge, response
	Expires   time.Time `json:"expires,omitzero"`    // challenge
	Host      string    `json:"host,omitempty"`      // response
	Signature []byte    `json:"signature,omitempty"` // response
	Reason    Reason    `json:"reason,omitempty"`    // rejected
	Org       string    `json:"org,omitempty"`       // rejected
	Message   string    `json:"message,omitempty"`   // rejected
}

// decodeMessage parses a handshake message and checks it is of type want
// (or, for the hub's verdict, ok or rejected).
func decodeMessage(data []byte, want ...string) (message, error) {
	var m message
	if err := json.Unmarshal(data, &m); err != nil {
		return message{}, fmt.Errorf("not a handshake message: %w", err)
	}
	for _, w := range want {
		if m.Type == w {
			return m, m.validate()
		}
	}
	return message{}, fmt.Errorf("got a %q message, want %s", truncate(m.Type, 32), strings.Join(want, " or "))
}

func (m message) validate() error {
	switch m.Type {
	case msgChallenge, msgResponse:
		b, err := base64.RawURLEncoding.DecodeString(m.Nonce)
		if err != nil || len(b) < 16 || len(b) > 64 {
			return errors.New("malformed nonce")
		}
		if m.Type == msgResponse && len(m.Signature) != 64 {
			return errors.New("malformed signature: want 64 bytes of Ed25519")
		}
	}
	return nil
}

// signedMessage is what the daemon signs: it names the protocol, the hub,
// the machine and the nonce, so a signature answers exactly one challenge.
func signedMessage(host, machineID, nonce string) []byte {
	return []byte(signaturePrefix + "|" + host + "|" + machineID + "|" + nonce)
}

// canonicalHost lower-cases a host[:port] and drops the default ports, so the
// daemon and the hub name the same hub the same way.
func canonicalHost(hostport string) string {
	hostport = strings.ToLower(strings.TrimSpace(hostport))
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport // no port
	}
	if port == "" || port == "80" || port == "443" {
		if strings.Contains(host, ":") {
			return "[" + host + "]"
		}
		return host
	}
	return net.JoinHostPort(host, port)
}

// ValidMachineID reports whether id can name a machine on the tunnel: 1 to
// 128 characters from A-Z a-z 0-9 . _ -.
func ValidMachineID(id string) bool {
	if id == "" || len(id) > maxMachineID {
		return false
	}
	for _, c := range []byte(id) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// truncate cuts s to at most n bytes (on a rune boundary) for messages and logs.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
