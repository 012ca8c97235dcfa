// Package allowlist parses and matches the egress allow lists of agent
// sandboxes: which host:port destinations the hub's egress proxy opens for
// a sandbox.
//
// An entry is an exact host ("api.openai.com") or a wildcard over the
// subdomains of a domain ("*.githubusercontent.com"), each with an optional
// port (":8443"; default 443, since agents talk HTTPS). Hosts are names,
// never IP addresses: the proxy resolves a name itself and refuses private
// addresses, and an address in a list would bypass that. A wildcard covers
// names one or more labels below its domain, not the domain itself, and
// needs a domain of at least two labels that is not a public suffix ("*.com"
// and "*.co.uk" are refused: they would allow half the internet; so is the
// suffix itself, "co.uk"). Entries are lowercase; a trailing dot is refused
// rather than guessed at. Matching is on the name the client asked for,
// lowercased and without a trailing dot.
package allowlist

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// DefaultPort is the port of an entry that names none.
const DefaultPort = 443

// ErrInvalid is wrapped by every error of Parse and ParseList.
var ErrInvalid = errors.New("invalid allow-list entry")

// Entry is one allowed destination.
type Entry struct {
	// Host is the exact host name, or the domain of a wildcard (without
	// the "*.").
	Host string
	// Wildcard is true for "*.Host": any name below Host, not Host itself.
	Wildcard bool
	// Port is the one port allowed (1 to 65535).
	Port int
}

// String is the entry in its canonical form, port included
// ("*.example.com:443").
func (e Entry) String() string {
	h := e.Host
	if e.Wildcard {
		h = "*." + h
	}
	return h + ":" + strconv.Itoa(e.Port)
}

// Match reports whether host:port is this entry's destination. host is
// compared lowercased and without a trailing dot.
func (e Entry) Match(host string, port int) bool {
	if port != e.Port {
		return false
	}
	host = Normalize(host)
	if !e.Wildcard {
		return host == e.Host
	}
	return len(host) > len(e.Host)+1 && strings.HasSuffix(host, "."+e.Host)
}

// Normalize is host as entries are matched against it: lowercase, without
// one trailing dot.
func Normalize(host string) string {
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

var (
	// labelRE is one DNS label: letters, digits and inner hyphens.
	labelRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	// tldRE: the last label starts with a letter, so that no IPv4 address
	// passes as a name.
	tldRE = regexp.MustCompile(`^[a-z]`)
)

// Parse reads one entry: HOST, *.DOMAIN, either with :PORT.
func Parse(s string) (Entry, error) {
	bad := func(why string) (Entry, error) {
		return Entry{}, fmt.Errorf("%w %q: %s", ErrInvalid, truncate(s), why)
	}
	switch {
	case s == "":
		return bad("empty")
	case strings.Contains(s, "://") || strings.ContainsAny(s, "/?#@"):
		return bad("want a host name (api.example.com), not a URL")
	case strings.HasPrefix(s, "["):
		return bad("want a host name, not an IP address")
	}
	e := Entry{Host: s, Port: DefaultPort}
	if h, p, ok := strings.Cut(s, ":"); ok {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 || p != strconv.Itoa(n) {
			return bad("the port must be a number from 1 to 65535")
		}
		e.Host, e.Port = h, n
	}
	if rest, ok := strings.CutPrefix(e.Host, "*."); ok {
		e.Host, e.Wildcard = rest, true
	}
	if e.Host != strings.ToLower(e.Host) {
		return bad("host names are written in lowercase")
	}
	if strings.HasSuffix(e.Host, ".") {
		return bad("no trailing dot")
	}
	if strings.Contains(e.Host, "*") {
		return bad(`a wildcard is "*." before a domain, nothing else`)
	}
	if len(e.Host) > 253 {
		return bad("a host name has at most 253 characters")
	}
	labels := strings.Split(e.Host, ".")
	for _, l := range labels {
		if !labelRE.MatchString(l) {
			return bad("want a host name: labels of letters, digits and inner hyphens, separated by dots")
		}
	}
	switch {
	case len(labels) < 2 && e.Wildcard:
		return bad("a wildcard needs a domain of two labels or more (*.example.com), not a top-level domain")
	case len(labels) < 2:
		return bad("want a fully qualified host name (api.example.com)")
	case !tldRE.MatchString(labels[len(labels)-1]):
		return bad("want a host name, not an IP address")
	}
	if err := CheckNotPublicSuffix(e.Host, e.Wildcard); err != nil {
		return bad(err.Error())
	}
	return e, nil
}

// List is an allow list: a destination is allowed when an entry matches.
type List []Entry

// ParseList parses every entry; the error names the first bad one.
func ParseList(entries []string) (List, error) {
	l := make(List, 0, len(entries))
	for _, s := range entries {
		e, err := Parse(s)
		if err != nil {
			return nil, err
		}
		l = append(l, e)
	}
	return l, nil
}

// Match reports whether some entry allows host:port.
func (l List) Match(host string, port int) bool {
	for _, e := range l {
		if e.Match(host, port) {
			return true
		}
	}
	return false
}

// Strings returns the entries in canonical form.
func (l List) Strings() []string {
	out := make([]string, len(l))
	for i, e := range l {
		out[i] = e.String()
	}
	return out
}

// String is the entries in canonical form, comma-separated.
func (l List) String() string { return strings.Join(l.Strings(), ",") }

// truncate keeps an error message short when the input is not.
func truncate(s string) string {
	if len(s) <= 80 {
		return s
	}
	return s[:80] + "…"
}

// ErrPublicSuffix: a domain is a public suffix.
var ErrPublicSuffix = errors.New("public suffix")

// CheckNotPublicSuffix refuses a domain that is an ICANN public suffix
// ("com", "co.uk"), under which anyone can register a name; with wildcard
// the entry would allow every such name. Private suffixes on the list
// ("githubusercontent.com", "s3.amazonaws.com") pass: one company runs
// them, and allowing its hosts is what such an entry means. Names under a
// TLD the list does not know ("corp.internal") pass.
func CheckNotPublicSuffix(domain string, wildcard bool) error {
	d := strings.TrimSuffix(strings.ToLower(domain), ".")
	if !strings.Contains(d, ".") {
		if wildcard || isICANN(d) {
			return fmt.Errorf("%w: %q is a top-level domain: name a host or *.yourdomain.example", ErrPublicSuffix, domain)
		}
		return nil
	}
	suffix, icann := publicsuffix.PublicSuffix(d)
	if suffix != d || !icann {
		return nil
	}
	what := domain
	if wildcard {
		what = "*." + domain
	}
	return fmt.Errorf("%w: %q covers a public suffix (%s), under which anyone can register a name: name your own domain, e.g. *.example.co.uk", ErrPublicSuffix, what, suffix)
}

// isICANN reports whether the list knows tld as an ICANN suffix.
func isICANN(tld string) bool {
	_, icann := publicsuffix.PublicSuffix(tld)
	return icann
}
