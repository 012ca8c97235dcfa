package agentimage

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/devdepot-ai/agentd/internal/allowlist"
)

// Brokered says how an agent's key variable is brokered: when a run names
// the variable as a secret (--secret OPENAI_API_KEY=ref:team/openai), the
// hub's egress proxy sets Header on the agent's requests to Host, with
// Format's "{secret}" replaced by the resolved value, and the variable
// itself gets a placeholder that means nothing outside.
type Brokered struct {
	// Env is the variable the agent reads its key from.
	Env string `json:"env"`
	// Host is the API's host ("api.openai.com"), HOST[:PORT].
	Host string `json:"host"`
	// Header is the header the key goes in ("Authorization").
	Header string `json:"header"`
	// Format is the header's value, holding "{secret}" once ("Bearer
	// {secret}").
	Format string `json:"format"`
}

// SecretMarker is where a brokered key goes in a Brokered.Format.
const SecretMarker = "{secret}"

var headerRE = regexp.MustCompile(`^[A-Za-z0-9!#$%&'*+.^_|~-]{1,64}$`)

// ValidHeaderName reports whether h is an HTTP header name (a token).
func ValidHeaderName(h string) bool { return headerRE.MatchString(h) }

func (b Brokered) validate() error {
	switch {
	case !envNameRE.MatchString(b.Env):
		return fmt.Errorf("brokered env %q: want an environment variable name", b.Env)
	case !ValidHeaderName(b.Header):
		return fmt.Errorf("brokered %s: header %q: want a header name", b.Env, b.Header)
	case strings.Count(b.Format, SecretMarker) != 1 || strings.ContainsAny(b.Format, "\r\n"):
		return fmt.Errorf("brokered %s: format %q: want %s once, on one line", b.Env, b.Format, SecretMarker)
	}
	if _, err := allowlist.Parse(b.Host); err != nil {
		return fmt.Errorf("brokered %s: %w", b.Env, err)
	}
	return nil
}
