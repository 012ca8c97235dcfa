//go:build linux

package transport

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"
)

// tcpPair is both ends of a real loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := lis.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// waitQueued waits until the kernel holds at least n unread bytes on c.
func waitQueued(t *testing.T, b *burstConn, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for queued(b.raw) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the kernel holds %d bytes, want %d", queued(b.raw), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestBurstConnReadsAWaitingBurstAtOnce(t *testing.T) {
	t.Parallel()
	client, server := tcpPair(t)
	b, ok := newBurstConn(server).(*burstConn)
	if !ok {
		t.Fatal("newBurstConn did not wrap a TCP conn on linux")
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
	if _, err := client.Write(data); err != nil {
		t.Fatal(err)
	}
	waitQueued(t, b, len(data))

	head := make([]byte, 9) // an HTTP/2 frame header's read
	if n, err := io.ReadFull(b, head); err != nil || n != 9 {
		t.Fatalf("read %d, %v", n, err)
	}
	if b.buf == nil || b.w-b.r != len(data)-9 {
		t.Fatalf("after a 9-byte read of a 64 KiB burst: buffered %d bytes, want %d in one read", b.w-b.r, len(data)-9)
	}
	if q := queued(b.raw); q != 0 {
		t.Errorf("the kernel still holds %d bytes after the burst read", q)
	}
	rest, err := io.ReadAll(io.LimitReader(b, int64(len(data)-9)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(append(head, rest...), data) {
		t.Fatal("bytes read through burstConn differ from those written")
	}
	if b.buf != nil {
		t.Error("a drained burstConn still holds its buffer")
	}
}

func TestBurstConnIdleHoldsNoBuffer(t *testing.T) {
	t.Parallel()
	client, server := tcpPair(t)
	b := newBurstConn(server).(*burstConn)
	got := make(chan []byte, 1)
	go func() {
		p := make([]byte, 1024)
		n, _ := b.Read(p) // blocks: nothing is waiting
		got <- p[:n]
	}()
	// While the reader waits, the burst path was not taken: the small
	// message below arrives through the caller's own buffer.
	if _, err := client.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if p := <-got; string(p) != "ping" {
		t.Fatalf("read %q, want ping", p)
	}
	if b.buf != nil {
		t.Error("a read of a small message took a pooled buffer")
	}
}

// TestBurstConnByteExact streams random bytes in random write sizes and
// reads them back in random read sizes (HTTP/2 header and frame sizes
// among them): every byte arrives, in order, and EOF after the last.
func TestBurstConnByteExact(t *testing.T) {
	t.Parallel()
	client, server := tcpPair(t)
	b := newBurstConn(server)
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 8<<20)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	go func() {
		w := rand.New(rand.NewPCG(3, 4))
		for rest := data; len(rest) > 0; {
			n := min(len(rest), 1+w.IntN(300<<10))
			if _, err := client.Write(rest[:n]); err != nil {
				return
			}
			rest = rest[n:]
		}
		client.Close()
	}()
	var got bytes.Buffer
	sizes := []int{9, 1024, 16384, 4096, 1, 300 << 10, 32768}
	for i := 0; ; i++ {
		p := make([]byte, sizes[i%len(sizes)])
		n, err := b.Read(p)
		got.Write(p[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read after %d bytes: %v", got.Len(), err)
		}
	}
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("got %d bytes, not the %d written (or not in order)", got.Len(), len(data))
	}
}
