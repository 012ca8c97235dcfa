package preview

import (
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// domainOf is the preview DOMAIN of Options.DomainURL ("" when unset),
// which the hub's own host (publicURL's) must not be under: every host
// under it is a preview's.
func domainOf(domainURL, publicURL string) (string, error) {
	if domainURL == "" {
		return "", nil
	}
	u, err := url.Parse(domainURL)
	if err != nil || u.Hostname() == "" || (u.Scheme != "http" && u.Scheme != "https") || (u.Path != "" && u.Path != "/") {
		return "", fmt.Errorf("preview domain URL %q: want http(s)://DOMAIN[:PORT]", domainURL)
	}
	domain := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if pu, err := url.Parse(publicURL); err == nil && publicURL != "" {
		h := strings.ToLower(strings.TrimSuffix(pu.Hostname(), "."))
		if h == domain || strings.HasSuffix(h, "."+domain) {
			return "", fmt.Errorf("the hub's own host %s is under the preview domain %s: every name there is a preview's, never the console's; use a domain of its own (say preview.%s)", h, domain, h)
		}
	}
	return domain, nil
}

// NewToken is a new exposure's secret: 256 random bits in lower case
// base32, so that it is one DNS label (52 characters) that survives a
// browser's lowering of host names, as well as a path segment.
func NewToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}

// URL is the URL of an exposure's token: under the preview domain when
// the server has one, else on the preview listener.
func (s *Server) URL(token string) string {
	if s.domain != "" {
		u, _ := url.Parse(s.opts.DomainURL) // checked by New
		host := token + "." + s.domain
		if p := u.Port(); p != "" {
			host = net.JoinHostPort(host, p)
		}
		return u.Scheme + "://" + host + "/"
	}
	return strings.TrimSuffix(s.opts.ListenURL, "/") + PathPrefix + token + "/"
}

// TokenOf is the token of a preview URL, either form; "" if raw is not
// one.
func (s *Server) TokenOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	if token, ok := s.HostToken(u.Host); ok {
		return token
	}
	rest, ok := strings.CutPrefix(u.Path, PathPrefix)
	if !ok {
		return ""
	}
	token, _, _ := strings.Cut(rest, "/")
	return token
}
