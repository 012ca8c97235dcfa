package transport

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"
)

// Every byte written arrives, in order, however the writes are batched,
// and Close writes out what is still buffered.
func TestCoalescingConnDeliversInOrder(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := lis.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		got <- b
	}()
	raw, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := newCoalescingConn(raw)
	want := make([]byte, 8<<20)
	rand.Read(want)
	for rest := want; len(rest) > 0; {
		n := min(len(rest), 1+len(rest)%5000) // uneven sizes, some above the limit
		if len(rest) > 1<<20 && len(rest)%3 == 0 {
			n = min(len(rest), coalesceLimit+1234)
		}
		if m, err := c.Write(rest[:n]); m != n || err != nil {
			t.Fatalf("Write(%d bytes) = %d, %v", n, m, err)
		}
		rest = rest[n:]
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("received %d bytes, not the %d written in order", len(b), len(want))
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Write after Close: %v, want net.ErrClosed", err)
	}
}

// Once the peer is gone, writes fail (the next one at the latest) and
// nothing blocks.
func TestCoalescingConnReportsWriteErrors(t *testing.T) {
	t.Parallel()
	a, b := net.Pipe()
	c := newCoalescingConn(a)
	b.Close()
	var err error
	for deadline := time.Now().Add(10 * time.Second); err == nil && time.Now().Before(deadline); {
		_, err = c.Write([]byte("hello"))
		runtime.Gosched()
	}
	if err == nil {
		t.Fatal("writes to a closed peer kept succeeding")
	}
	c.Close()
}
