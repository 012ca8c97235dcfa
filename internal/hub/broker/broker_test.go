package broker

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseSecretHeader: the rule's host, port, header and the value with
// the secret's place; bad rules refused without repeating the value.
func TestParseSecretHeader(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][4]string{
		"api.openai.com:Authorization=Bearer ref:team/openai":  {"api.openai.com", "443", "Authorization", "Bearer \x00|team/openai"},
		"mirror.internal:8443:X-Token=ref:ci/mirror.token;v=1": {"mirror.internal", "8443", "X-Token", "\x00;v=1|ci/mirror.token"},
	} {
		r, ref, err := ParseHeader(in)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		got := [4]string{r.Host, itoa(r.Port), r.Header, string(r.Value) + "|" + ref}
		if diff := cmp.Diff(got, want); diff != "" {
			t.Errorf("%s (-got +want):\n%s", in, diff)
		}
	}
	for in, want := range map[string]string{
		"api.openai.com:Authorization=Bearer sk-live-123": "one ref:PATH",
		"api.openai.com:Authorization":                    "want HOST[:PORT]:HEADER=VALUE",
		"10.0.0.1:Authorization=ref:a":                    "not an IP address",
		"*.openai.com:Authorization=ref:a":                "one host",
		"api.openai.com:Host=ref:a":                       "frames the message",
		"api.openai.com:Bad Header=ref:a":                 "no header name",
		"api.openai.com:X=ref:":                           "names no secret",
		"api.openai.com:X=ref:a ref:b":                    "one ref:PATH",
	} {
		_, _, err := ParseHeader(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want an error saying %q", in, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "sk-live-123") {
			t.Errorf("%s: the error repeats the value: %v", in, err)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
