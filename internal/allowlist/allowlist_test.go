package allowlist

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want Entry
	}{
		{"api.openai.com", Entry{Host: "api.openai.com", Port: 443}},
		{"api.openai.com:8443", Entry{Host: "api.openai.com", Port: 8443}},
		{"*.githubusercontent.com", Entry{Host: "githubusercontent.com", Wildcard: true, Port: 443}},
		{"*.example.co.uk:80", Entry{Host: "example.co.uk", Wildcard: true, Port: 80}},
		{"a-b.x9.dev", Entry{Host: "a-b.x9.dev", Port: 443}},
	} {
		got, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(got, tc.want); diff != "" {
			t.Errorf("Parse(%q) (-got +want):\n%s", tc.in, diff)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", "empty"},
		{"https://api.openai.com", "not a URL"},
		{"api.openai.com/v1", "not a URL"},
		{"user@host.com", "not a URL"},
		{"10.0.0.1", "not an IP address"},
		{"169.254.169.254:80", "not an IP address"},
		{"[::1]:443", "not an IP address"},
		{"::1", "port must be a number"},
		{"API.openai.com", "lowercase"},
		{"api.openai.com.", "trailing dot"},
		{"*", `"*." before a domain`},
		{"*.com", "two labels or more"},
		{"*.co.uk", `"*.co.uk" covers a public suffix (co.uk)`},
		{"co.uk", `"co.uk" covers a public suffix (co.uk)`},
		{"**.example.com", `"*." before a domain`},
		{"api.*.example.com", `"*." before a domain`},
		{"localhost", "fully qualified"},
		{"api.openai.com:0", "1 to 65535"},
		{"api.openai.com:65536", "1 to 65535"},
		{"api.openai.com:+443", "1 to 65535"},
		{"api.openai.com:443:1", "1 to 65535"},
		{"api.openai.com:", "1 to 65535"},
		{"-api.openai.com", "labels of letters"},
		{"api..openai.com", "labels of letters"},
		{"api_x.openai.com", "labels of letters"},
		{"a." + strings.Repeat("b", 64) + ".com", "labels of letters"},
	} {
		_, err := Parse(tc.in)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v; want ErrInvalid saying %q", tc.in, err, tc.want)
		}
	}
}

func TestMatch(t *testing.T) {
	t.Parallel()
	l, err := ParseList([]string{"api.openai.com", "*.githubusercontent.com", "plain.example.com:80"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		port int
		want bool
	}{
		{"api.openai.com", 443, true},
		{"API.OpenAI.com.", 443, true}, // as clients may write it
		{"api.openai.com", 80, false},  // the default port is 443 only
		{"openai.com", 443, false},
		{"xapi.openai.com", 443, false},
		{"api.openai.com.evil.net", 443, false},
		{"raw.githubusercontent.com", 443, true},
		{"a.b.githubusercontent.com", 443, true},
		{"githubusercontent.com", 443, false}, // a wildcard is below its domain
		{"evilgithubusercontent.com", 443, false},
		{".githubusercontent.com", 443, false},
		{"plain.example.com", 80, true},
		{"plain.example.com", 443, false},
		{"", 443, false},
	} {
		if got := l.Match(tc.host, tc.port); got != tc.want {
			t.Errorf("Match(%q, %d) = %v, want %v", tc.host, tc.port, got, tc.want)
		}
	}
	if diff := cmp.Diff(l.String(), "api.openai.com:443,*.githubusercontent.com:443,plain.example.com:80"); diff != "" {
		t.Errorf("String (-got +want):\n%s", diff)
	}
	if _, err := ParseList([]string{"ok.example.com", "bad"}); err == nil || !strings.Contains(err.Error(), `"bad"`) {
		t.Errorf("ParseList with a bad entry = %v; want an error naming it", err)
	}
}
