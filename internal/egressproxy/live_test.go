package egressproxy

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/devdepot-ai/agentd/internal/allowlist"
)

// liveGrant is a grant a test changes while tunnels are open, as the hub's
// store does for agentctl sandbox allow | deny.
type liveGrant struct {
	mu sync.Mutex
	g  Grant
}

func (l *liveGrant) set(t *testing.T, gen, cutGen int64, allow ...string) {
	t.Helper()
	list, err := allowlist.ParseList(allow)
	if err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	l.g.Allow, l.g.Gen, l.g.CutGen = list, gen, cutGen
	l.mu.Unlock()
}

func (l *liveGrant) get() Grant {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.g
}

// startLive is a Forwarder and a Proxy over a real unix socket whose
// grant is live, dialling echo servers on loopback for every name.
func startLive(t *testing.T, recheck time.Duration) (*Proxy, *Forwarder, *liveGrant) {
	t.Helper()
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { echo.Close() })
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	lg := &liveGrant{g: Grant{Key: pub}}
	proxy, err := NewProxy(ProxyOptions{
		Lookup: func(_ context.Context, id string) (Grant, error) {
			if id != sandboxID {
				return Grant{}, ErrUnknownSandbox
			}
			return lg.get(), nil
		},
		Dial: func(ctx context.Context, _ string, _ int) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", echo.Addr().String())
		},
		Logger:       zaptest.NewLogger(t),
		RecheckEvery: recheck,
	})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "hub.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() {
		_ = srv.Close()
		_ = proxy.Close()
	})
	fw, err := Listen(ForwarderOptions{Listen: "127.0.0.1:0", HubSocket: sock, SandboxID: sandboxID, Key: key, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- fw.Serve(context.Background()) }()
	t.Cleanup(func() {
		_ = fw.Close()
		<-done
	})
	return proxy, fw, lg
}

// connect opens a tunnel through the forwarder; the status code, and the
// open connection when it is 200.
func connect(t *testing.T, fw *Forwarder, target string) (int, net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", fw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		conn.Close()
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	if resp.StatusCode != http.StatusOK {
		conn.Close()
		return resp.StatusCode, nil, nil
	}
	t.Cleanup(func() { conn.Close() })
	return resp.StatusCode, conn, br
}

// alive reports whether a tunnel still echoes.
func alive(conn net.Conn, br *bufio.Reader) bool {
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, "ping"); err != nil {
		return false
	}
	buf := make([]byte, 4)
	_, err := io.ReadFull(br, buf)
	return err == nil && string(buf) == "ping"
}

// A change of the allow list holds for the next CONNECT at once; a tunnel
// already open stays, unless the change cuts: then the tunnels to what the
// new list does not allow are closed within the recheck interval (a change
// made elsewhere) and at once by Recheck, and those it allows stay.
func TestLiveAllowList(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		recheck time.Duration
	}{{"loop", 100 * time.Millisecond}, {"Recheck", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			proxy, fw, lg := startLive(t, tc.recheck)
			lg.set(t, 1, 0, "a.example.com:7")
			if code, _, _ := connect(t, fw, "b.example.com:7"); code != http.StatusForbidden {
				t.Fatalf("b before it is allowed: %d, want 403", code)
			}
			code, ca, bra := connect(t, fw, "a.example.com:7")
			if code != 200 || !alive(ca, bra) {
				t.Fatalf("a: %d", code)
			}

			// Generation 2: b instead of a, without cutting.
			lg.set(t, 2, 0, "b.example.com:7")
			if code, _, _ := connect(t, fw, "a.example.com:7"); code != http.StatusForbidden {
				t.Errorf("a after deny: %d, want 403", code)
			}
			code, cb, brb := connect(t, fw, "b.example.com:7")
			if code != 200 || !alive(cb, brb) {
				t.Fatalf("b after allow: %d", code)
			}
			if tc.recheck > 0 {
				time.Sleep(3 * tc.recheck) // several rechecks: none may cut
			} else if n, err := proxy.Recheck(t.Context(), sandboxID); n != 0 || err != nil {
				t.Errorf("Recheck without a cut = %d, %v", n, err)
			}
			if !alive(ca, bra) {
				t.Fatal("a change without --cut closed an open tunnel")
			}

			// Generation 3 cuts: a's tunnel (generation 1, not allowed)
			// closes, b's (allowed) stays.
			lg.set(t, 3, 3, "b.example.com:7")
			if tc.recheck < 0 {
				if n, err := proxy.Recheck(t.Context(), sandboxID); n != 1 || err != nil {
					t.Errorf("Recheck = %d, %v; want 1 closed", n, err)
				}
			}
			_ = ca.SetReadDeadline(time.Now().Add(time.Second)) // within 1 s
			if _, err := bra.ReadByte(); err == nil || isTimeout(err) {
				t.Errorf("a's tunnel after a cutting deny: read %v, want it closed", err)
			}
			if !alive(cb, brb) {
				t.Error("a cut closed a tunnel the new list allows")
			}
			if n := proxy.Tunnels(sandboxID); n != 1 {
				t.Errorf("Tunnels = %d, want 1", n)
			}
		})
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return err != nil && errorsAs(err, &ne) && ne.Timeout()
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }
