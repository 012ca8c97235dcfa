package store

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

func TestNewToken(t *testing.T) {
	t.Parallel()
	a, ha := NewToken()
	b, hb := NewToken()
	if !regexp.MustCompile(`^agt_[A-Za-z0-9_-]{43}$`).MatchString(a) {
		t.Errorf("token %q: want agt_ and 43 base64url characters", a)
	}
	if a == b || ha == hb {
		t.Error("two tokens are equal")
	}
	if got, err := ParseToken(a); err != nil || got != ha {
		t.Errorf("ParseToken(NewToken()) = %x, %v; want its hash %x", got, err, ha)
	}
}

func TestParseTokenRejects(t *testing.T) {
	t.Parallel()
	good, _ := NewToken()
	body := good[len(TokenPrefix):]
	tests := map[string]string{
		"empty":          "",
		"no prefix":      body,
		"other prefix":   "ghp_" + body,
		"short":          good[:len(good)-1],
		"long":           good + "A",
		"std base64":     TokenPrefix + strings.Repeat("+", 43),
		"padding":        TokenPrefix + body[:42] + "=",
		"space":          TokenPrefix + " " + body[1:],
		"non-ASCII":      TokenPrefix + "é" + body[2:],
		"non-canonical":  TokenPrefix + body[:42] + "B", // last character carries unused bits
		"bearer in it":   "Bearer " + good,
		"uppercase pfx":  "AGT_" + body,
		"trailing space": good[:len(good)-1] + " ",
	}
	for name, tok := range tests {
		if _, err := ParseToken(tok); !errors.Is(err, ErrMalformedToken) {
			t.Errorf("%s: ParseToken(%q) error %v, want ErrMalformedToken", name, tok, err)
		}
	}
}
