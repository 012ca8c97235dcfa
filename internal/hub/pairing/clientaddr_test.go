package pairing

import "testing"

func TestClientKey(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"192.0.2.1:5000", "192.0.2.1"},
		{"192.0.2.1", "192.0.2.1"},
		{"[::ffff:192.0.2.1]:5000", "192.0.2.1"},
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:ffff::1]:443", "2001:db8:1:2::/64"},
		{"2001:db8:1:3::1", "2001:db8:1:3::/64"},
		{"[fe80::1%eth0]:22", "fe80::/64"},
		{"@", "@"}, // a unix socket or anything else: the string itself
		{"", ""},
	}
	for _, tt := range tests {
		if got := clientKey(tt.in); got != tt.want {
			t.Errorf("clientKey(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
