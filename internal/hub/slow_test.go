package hub_test

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// A connection that sends no complete request is closed within seconds,
// however it trickles: nothing at all, the HTTP/2 preface and then
// nothing (before: gRPC's 120 s handshake timeout), or an HTTP/1.1
// request line and then a header byte a second.
func TestIncompleteRequestsClosed(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	const within = 25 * time.Second // classification (10 s) + the server's own (10 s) + slack
	for _, tc := range []struct {
		name    string
		first   string
		trickle bool
	}{
		{"silent", "", false},
		{"http2 preface only", http2.ClientPreface, false},
		{"http1 header trickled", "GET /healthz HTTP/1.1\r\nHost: hub\r\nX-Slow: ", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := net.Dial("tcp", h.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			if _, err := io.WriteString(c, tc.first); err != nil {
				t.Fatal(err)
			}
			closed := make(chan error, 1)
			go func() {
				_ = c.SetReadDeadline(start.Add(within))
				_, err := io.Copy(io.Discard, c)
				closed <- err
			}()
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case err := <-closed:
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() {
						t.Fatalf("still open after %s", within)
					}
					t.Logf("closed by the hub after %s", time.Since(start).Round(100*time.Millisecond))
					return
				case <-tick.C:
					if tc.trickle {
						_, _ = c.Write([]byte("x"))
					}
				}
			}
		})
	}
}
