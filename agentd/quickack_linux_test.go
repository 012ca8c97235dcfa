package agentd

import (
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// quickAck takes a loopback connection out of the kernel's delayed-ACK
// (pingpong) mode: a server that sends a response's headers and body in two
// writes with Nagle on (python3 -m http.server) then gets the ACK it waits
// for at once instead of ~40 ms later (see docs/performance.md, Previews).
func TestQuickAckLeavesPingpongMode(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			defer c.Close()
			_, _ = c.Read(make([]byte, 1))
		}
	}()
	c, err := net.Dial("tcp4", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tc := c.(*net.TCPConn)
	get := func() int {
		rc, err := tc.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		v := -1
		if err := rc.Control(func(fd uintptr) { v, err = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK) }); err != nil {
			t.Fatal(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// Into pingpong mode, as back-to-back requests put it.
	rc, err := tc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK, 0) }); err != nil {
		t.Fatal(err)
	}
	if v := get(); v != 0 {
		t.Fatalf("TCP_QUICKACK after setting 0 reads %d; the test cannot tell", v)
	}
	quickAck(tc)
	if v := get(); v != 1 {
		t.Fatalf("TCP_QUICKACK after quickAck reads %d, want 1 (quick ACKs)", v)
	}
}
