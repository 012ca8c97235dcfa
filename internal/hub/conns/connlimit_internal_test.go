package conns

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeAddrConn is a net.Conn whose only use here is its remote address.
type fakeAddrConn struct {
	net.Conn
	remote net.Addr
}

func (c fakeAddrConn) RemoteAddr() net.Addr { return c.remote }

// A TCP client counts by its address (IPv6: its /64); a trusted proxy is
// not capped.
func TestTCPClientKey(t *testing.T) {
	t.Parallel()
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	type key struct {
		Key    string
		Capped bool
	}
	for _, tc := range []struct {
		remote string
		want   key
	}{
		{"192.0.2.7:5000", key{"192.0.2.7", true}},
		{"[::ffff:192.0.2.7]:5000", key{"192.0.2.7", true}},
		{"[2001:db8:1:2:3:4:5:6]:443", key{"2001:db8:1:2::/64", true}},
		{"[2001:db8:1:2:ffff::1]:443", key{"2001:db8:1:2::/64", true}},
		{"10.1.2.3:80", key{"10.1.2.3", false}},
		{"[fd00::1]:80", key{"fd00::/64", false}},
	} {
		ap := netip.MustParseAddrPort(tc.remote)
		k, capped := TCPClientKey(trusted)(fakeAddrConn{remote: net.TCPAddrFromAddrPort(ap)})
		if diff := cmp.Diff(key{k, capped}, tc.want); diff != "" {
			t.Errorf("%s (-got +want):\n%s", tc.remote, diff)
		}
	}
}

// The limiter refuses past a key's cap and past the total, and a closed
// connection gives its slot back once (closing twice does not free two).
func TestConnLimiter(t *testing.T) {
	t.Parallel()
	l := NewLimiter(3)
	a1, b1 := net.Pipe()
	defer b1.Close()
	c1 := l.wrap(a1, "a", 2)
	c2 := l.wrap(nopConn{}, "a", 2)
	if c1 == nil || c2 == nil {
		t.Fatal("refused under the caps")
	}
	if c := l.wrap(nopConn{}, "a", 2); c != nil {
		t.Error("a third connection of key a (cap 2) was taken")
	}
	if c := l.wrap(nopConn{}, "b", 0); c == nil {
		t.Error("b (no cap) was refused under the total")
	}
	if c := l.wrap(nopConn{}, "c", 0); c != nil {
		t.Error("a fourth connection was taken (total 3)")
	}
	c1.Close()
	c1.Close()
	if c := l.wrap(nopConn{}, "a", 2); c == nil {
		t.Error("refused after a connection closed")
	}
	if c := l.wrap(nopConn{}, "c", 0); c != nil {
		t.Error("closing one connection twice freed two slots")
	}
}

type nopConn struct{ net.Conn }

func (nopConn) Close() error { return nil }

// A limited listener closes a connection over its key's cap as it is
// accepted, counts it in Refused, and hands out the next one.
func TestLimitRefuses(t *testing.T) {
	t.Parallel()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := NewLimiter(0)
	lis := l.Limit(inner, 1, func(net.Conn) (string, bool) { return "k", true })
	defer lis.Close()
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial()
	first := <-accepted
	refused := dial()
	// The refused connection is closed by the hub: its read ends.
	if _, err := refused.Read(make([]byte, 1)); err == nil {
		t.Fatal("read from a connection over the cap succeeded")
	}
	first.Close() // gives its slot back
	dial()
	c := <-accepted
	if c == nil {
		t.Fatal("Accept failed after a slot was given back")
	}
	c.Close()
	// Accept counted the refusal before it went on to this connection.
	if got := l.Refused(); got != 1 {
		t.Errorf("Refused = %d, want 1", got)
	}
}
