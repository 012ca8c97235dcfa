package egressproxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
)

// echoServer accepts on loopback and echoes each connection until EOF.
func echoServer(b *testing.B) net.Listener {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return lis
}

// connectVia opens a tunnel to target through the forwarder at addr.
func connectVia(b *testing.B, addr, target string) (net.Conn, *bufio.Reader) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("CONNECT: %v %v", resp, err)
	}
	return c, br
}

// One connection through the forwarder, the hub's socket and the proxy
// (signing, verifying, matching, dialing), and a one-byte round trip;
// BenchmarkDirectConnect is the same straight to the server.
func BenchmarkChainConnect(b *testing.B) {
	echo := echoServer(b)
	ch := startChain(b, []string{"echo.example.com:7"}, map[string]string{"echo.example.com:7": echo.Addr().String()})
	buf := make([]byte, 1)
	for b.Loop() {
		c, br := connectVia(b, ch.fw.Addr().String(), "echo.example.com:7")
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(br, buf); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

func BenchmarkDirectConnect(b *testing.B) {
	echo := echoServer(b)
	buf := make([]byte, 1)
	for b.Loop() {
		c, err := net.Dial("tcp", echo.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

// Bulk bytes through one tunnel (there and back: the echo server returns
// them), 256 KiB per write.
func BenchmarkChainThroughput(b *testing.B) {
	echo := echoServer(b)
	ch := startChain(b, []string{"echo.example.com:7"}, map[string]string{"echo.example.com:7": echo.Addr().String()})
	c, br := connectVia(b, ch.fw.Addr().String(), "echo.example.com:7")
	defer c.Close()
	chunk := make([]byte, 256<<10)
	back := make([]byte, len(chunk))
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		go func() { _, _ = c.Write(chunk) }()
		if _, err := io.ReadFull(br, back); err != nil {
			b.Fatal(err)
		}
	}
}
