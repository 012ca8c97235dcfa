package store

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
)

// TokenPrefix starts every API token, so a leaked one is recognisable (and
// findable by secret scanners).
const TokenPrefix = "agt_"

// tokenLen is the length of a token: the prefix and 32 bytes in unpadded
// base64url.
var tokenLen = len(TokenPrefix) + base64.RawURLEncoding.EncodedLen(32)

// ErrMalformedToken: the string cannot be an API token.
var ErrMalformedToken = errors.New("malformed API token: want " + TokenPrefix + " followed by 43 base64url characters")

// NewToken makes a new API token: 256 random bits, shown to its owner once.
// Only its hash is stored.
func NewToken() (token string, hash TokenHash) {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand panics rather than return short)
	token = TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	return token, HashToken(token)
}

// ParseToken checks the token's form and returns its hash, the key to look it
// up with (TokenByHash).
//
// The hash is plain SHA-256, not a slow KDF: the token carries 256 random
// bits, so the hash cannot be inverted by guessing, and a fast hash keeps the
// lookup on every call cheap. The lookup is an index seek on the hash, not a
// comparison of secrets: learning through timing which hash prefixes exist
// tells an attacker nothing about any token (they would need a SHA-256
// preimage), so no constant-time compare is needed.
func ParseToken(token string) (TokenHash, error) {
	if len(token) != tokenLen || !strings.HasPrefix(token, TokenPrefix) {
		return TokenHash{}, ErrMalformedToken
	}
	if _, err := base64.RawURLEncoding.Strict().DecodeString(token[len(TokenPrefix):]); err != nil {
		return TokenHash{}, ErrMalformedToken
	}
	return HashToken(token), nil
}

// HashToken returns the SHA-256 of the whole token, prefix included.
func HashToken(token string) TokenHash { return sha256.Sum256([]byte(token)) }
