package conns

import (
	"net/http"
	"net/netip"
	"testing"
)

func TestClientAddr(t *testing.T) {
	t.Parallel()
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	tests := []struct {
		name    string
		remote  string
		xff     []string
		trusted []netip.Prefix
		want    string
	}{
		{"no proxies trusted: the header is ignored", "10.0.0.5:4000", []string{"192.0.2.7"}, nil, "10.0.0.5:4000"},
		{"an untrusted peer cannot claim an address", "198.51.100.1:4000", []string{"192.0.2.7"}, trusted, "198.51.100.1:4000"},
		{"a trusted proxy: the address it saw", "10.0.0.5:4000", []string{"192.0.2.7"}, trusted, "192.0.2.7"},
		{"what the client prepended is not believed", "10.0.0.5:4000", []string{"203.0.113.9, 192.0.2.7"}, trusted, "192.0.2.7"},
		{"two trusted proxies in a row", "10.0.0.5:4000", []string{"192.0.2.7, 10.1.2.3"}, trusted, "192.0.2.7"},
		{"several headers", "10.0.0.5:4000", []string{"203.0.113.9", "192.0.2.7"}, trusted, "192.0.2.7"},
		{"IPv6 proxy, IPv6 client", "[::1]:4000", []string{"2001:db8::7"}, trusted, "2001:db8::7"},
		{"garbage in the header", "10.0.0.5:4000", []string{"192.0.2.7, not-an-ip"}, trusted, "10.0.0.5:4000"},
		{"no header from a trusted proxy", "10.0.0.5:4000", nil, trusted, "10.0.0.5:4000"},
		{"only proxies in the header", "10.0.0.5:4000", []string{"10.9.9.9"}, trusted, "10.0.0.5:4000"},
	}
	for _, tt := range tests {
		r := &http.Request{RemoteAddr: tt.remote, Header: http.Header{}}
		for _, v := range tt.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := ClientAddr(r, tt.trusted); got != tt.want {
			t.Errorf("%s: ClientAddr = %q, want %q", tt.name, got, tt.want)
		}
	}
}
