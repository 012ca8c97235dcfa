package transport_test

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/transport"
)

// A byte stream over a real listener, plain and TLS: the daemon dials
// with the offer's token, the hub's side gets the connection, bytes and
// half-closes pass both ways; a token works once, for its machine only.
func TestStreamHandoff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		tls  bool
	}{{name: "plain"}, {name: "tls", tls: true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			streams := transport.NewStreams()
			mux := http.NewServeMux()
			mux.Handle("GET "+transport.StreamPath, streams)
			srv := httptest.NewUnstartedServer(mux)
			var pool *x509.CertPool
			if tc.tls {
				pool, srv.TLS = testCA(t)
				srv.StartTLS()
			} else {
				srv.Start()
			}
			t.Cleanup(srv.Close)
			hubURL := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) // the test CA's name
			_, key := newKey(t)
			opts := daemonOptions(t, hubURL, "m1", key)
			opts.RootCAs = pool
			tun, err := transport.Listen(opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tun.Close() })
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()

			o := streams.Offer("m1")
			dc, err := tun.DialStream(ctx, o.Token())
			if err != nil {
				t.Fatal(err)
			}
			defer dc.Close()
			hc, err := o.Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer hc.Close()
			if streams.Taken() != 1 || streams.Pending() != 0 {
				t.Errorf("taken %d, pending %d; want 1, 0", streams.Taken(), streams.Pending())
			}
			big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
			go func() {
				_, _ = io.WriteString(dc, "ping"+big)
				_ = transport.CloseWrite(dc)
			}()
			got, err := io.ReadAll(hc)
			if err != nil || string(got) != "ping"+big {
				t.Fatalf("the hub read %d bytes, %v; want ping and 1 MiB, then EOF", len(got), err)
			}
			// The daemon's half-close left the other way open.
			go func() {
				_, _ = io.WriteString(hc, "pong")
				_ = transport.CloseWrite(hc)
			}()
			got, err = io.ReadAll(dc)
			if err != nil || string(got) != "pong" {
				t.Fatalf("the daemon read %q, %v; want pong, then EOF", got, err)
			}

			// Used, unknown, another machine's, withdrawn: refused.
			other := streams.Offer("m2")
			withdrawn := streams.Offer("m1")
			withdrawn.Cancel()
			for name, token := range map[string]string{"used": o.Token(), "unknown": "nope", "another machine's": other.Token(),
				"withdrawn": withdrawn.Token()} {
				if c, err := tun.DialStream(ctx, token); err == nil || !strings.Contains(err.Error(), "404") {
					if c != nil {
						c.Close()
					}
					t.Errorf("%s token: %v, want the hub's 404", name, err)
				}
			}
			other.Cancel()
			if streams.Taken() != 1 || streams.Pending() != 0 {
				t.Errorf("after the refusals: taken %d, pending %d; want 1, 0", streams.Taken(), streams.Pending())
			}
		})
	}
}

// A daemon that reaches its hub through an HTTP proxy does not open byte
// streams (the connection then goes in messages).
func TestStreamBehindProxy(t *testing.T) {
	t.Parallel()
	_, key := newKey(t)
	opts := daemonOptions(t, "https://hub.example", "m1", key)
	opts.Proxy = func(*http.Request) (*url.URL, error) { return url.Parse("http://proxy.example:3128") }
	tun, err := transport.Listen(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer tun.Close()
	if _, err := tun.DialStream(t.Context(), "x"); !errors.Is(err, transport.ErrStreamUnavailable) {
		t.Fatalf("DialStream behind a proxy: %v, want ErrStreamUnavailable", err)
	}
}

// A request that is not an upgrade to agentd-stream is refused, and an
// offer withdrawn after the stream arrived closes it.
func TestStreamRefusals(t *testing.T) {
	t.Parallel()
	streams := transport.NewStreams()
	srv := httptest.NewServer(streams)
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + transport.StreamPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a plain GET: %d, want 400", resp.StatusCode)
	}

	_, key := newKey(t)
	tun, err := transport.Listen(daemonOptions(t, srv.URL, "m1", key))
	if err != nil {
		t.Fatal(err)
	}
	defer tun.Close()
	o := streams.Offer("m1")
	dc, err := tun.DialStream(t.Context(), o.Token())
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	o.Cancel() // the call gave up before it took the stream
	_ = dc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := dc.Read(make([]byte, 1)); n != 0 || err == nil || errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		t.Fatalf("read on a withdrawn stream: %d, %v; want it closed", n, err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
