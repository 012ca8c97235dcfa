package egressproxy

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// ForwarderOptions configures a Forwarder. Zero fields get the defaults
// documented on them.
type ForwarderOptions struct {
	// Listen is the loopback address processes in the sandbox reach the
	// proxy at ("127.0.0.1:3128"). Required; only loopback is accepted.
	Listen string
	// HubSocket is the path of the hub's unix socket. Required unless
	// Dial is set.
	HubSocket string
	// Dial opens a connection to the hub's proxy, in place of HubSocket:
	// agentd's tunnel transport (transport.Tunnel.DialHub), which for a
	// sandbox that dials the hub over the network is TLS to the hub's
	// sandbox listener, verified with the CA the hub pinned. Default: the
	// unix socket HubSocket.
	Dial func(ctx context.Context) (net.Conn, error)
	// SandboxID and Key are the sandbox's identity, which signs each
	// request. Required.
	SandboxID string
	Key       ed25519.PrivateKey
	// Logger receives failures to reach the hub. Default: a no-op logger.
	Logger *zap.Logger
	// Now is the clock the requests are signed with. Default time.Now.
	Now func() time.Time
	// Timeout bounds reading a client's request head, and the hub's
	// answer. Default 30 s.
	Timeout time.Duration
}

// Forwarder is the sandbox's end: an HTTP proxy on the sandbox's loopback
// that carries each connection to the hub's Proxy.
type Forwarder struct {
	o   ForwarderOptions
	log *zap.Logger
	lis net.Listener
	// ctx ends with Close: it cancels the dials to the hub in flight.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// Listen checks o and listens on o.Listen; Serve serves.
func Listen(o ForwarderOptions) (*Forwarder, error) {
	ap, err := netip.ParseAddrPort(o.Listen)
	switch {
	case err != nil || !ap.Addr().IsLoopback():
		return nil, fmt.Errorf("egress proxy address %q: want a loopback ip:port (127.0.0.1:3128)", o.Listen)
	case o.HubSocket == "" && o.Dial == nil || o.SandboxID == "" || len(o.Key) != ed25519.PrivateKeySize:
		return nil, errors.New("egress proxy: the hub socket (or a dialer), sandbox id and key are required")
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Dial == nil {
		sock, timeout := o.HubSocket, o.Timeout
		o.Dial = func(ctx context.Context) (net.Conn, error) {
			return (&net.Dialer{Timeout: timeout}).DialContext(ctx, "unix", sock)
		}
	}
	lis, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("egress proxy: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Forwarder{o: o, log: o.Logger.Named("egress"), lis: lis, ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}, nil
}

// Addr is the address the proxy listens on.
func (f *Forwarder) Addr() net.Addr { return f.lis.Addr() }

// Serve accepts connections until ctx ends or Close is called, then closes
// the Forwarder (every connection) and returns nil.
func (f *Forwarder) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { _ = f.Close() })
	defer stop()
	for {
		c, err := f.lis.Accept()
		if err != nil {
			_ = f.Close()
			if f.isClosed() {
				return nil
			}
			return fmt.Errorf("egress proxy: %w", err)
		}
		if !f.track(c) {
			c.Close()
			return nil
		}
		go func() {
			defer f.untrack(c)
			f.handle(c)
		}()
	}
}

// Close stops listening, ends every connection and waits for them.
// Idempotent.
func (f *Forwarder) Close() error {
	f.mu.Lock()
	if !f.closed {
		f.closed = true
		f.cancel()
		_ = f.lis.Close()
		for c := range f.conns {
			c.Close()
		}
	}
	f.mu.Unlock()
	f.wg.Wait()
	return nil
}

func (f *Forwarder) isClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

func (f *Forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[c] = struct{}{}
	f.wg.Add(1)
	return true
}

func (f *Forwarder) untrack(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	c.Close()
	f.wg.Done()
}

// answer writes a response of the proxy's own to the client.
func answer(c net.Conn, code int, msg string) {
	body := "agentd egress proxy: " + msg + "\n"
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), len(body), body)
}

// handle serves one client connection: one CONNECT tunnel, or one plain
// http request.
func (f *Forwarder) handle(c net.Conn) {
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(f.o.Timeout))
	req, err := http.ReadRequest(br)
	if err != nil {
		if !errors.Is(err, io.EOF) {
			answer(c, http.StatusBadRequest, "could not read the request: "+err.Error())
		}
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	target, err := requestTarget(req)
	if err != nil {
		answer(c, http.StatusBadRequest, err.Error())
		return
	}
	up, ur, err := f.connect(target)
	if err != nil {
		f.log.Warn("egress: the hub is unreachable", zap.String("target", target), zap.Error(err))
		answer(c, http.StatusBadGateway, "the hub is unreachable: "+err.Error())
		return
	}
	defer up.Close()
	resp, err := http.ReadResponse(ur, &http.Request{Method: http.MethodConnect})
	if err != nil {
		answer(c, http.StatusBadGateway, "the hub's answer: "+err.Error())
		return
	}
	if resp.StatusCode != http.StatusOK {
		// The hub's refusal, body and all, for the client to show.
		resp.Close = true
		_ = resp.Write(c)
		resp.Body.Close()
		return
	}
	_ = up.SetReadDeadline(time.Time{})
	if req.Method == http.MethodConnect {
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return
		}
	} else {
		// Plain http: the request goes on in origin form, the last on
		// this connection (the next may be for another host).
		req.Header.Del("Proxy-Connection")
		req.Header.Del("Proxy-Authorization")
		req.Close = true
		if err := req.Write(up); err != nil {
			return
		}
	}
	Splice(c, br, up, ur)
}

// requestTarget is the host:port a proxy request is for.
func requestTarget(req *http.Request) (string, error) {
	if req.Method == http.MethodConnect {
		if _, _, err := splitTarget(req.Host); err != nil {
			return "", err
		}
		return req.Host, nil
	}
	u := req.URL
	switch {
	case !u.IsAbs() || u.Host == "":
		return "", errors.New("this is the sandbox's egress proxy: send absolute URLs (http://host/path) or CONNECT host:port")
	case u.Scheme != "http":
		return "", fmt.Errorf("%s URLs go through CONNECT (set HTTPS_PROXY); plain requests are for http:// only", u.Scheme)
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}

// connect opens a connection to the hub's proxy and sends the signed
// CONNECT for target; the answer is read from the returned reader.
func (f *Forwarder) connect(target string) (net.Conn, *bufio.Reader, error) {
	ctx, cancel := context.WithTimeout(f.ctx, f.o.Timeout)
	up, err := f.o.Dial(ctx)
	cancel()
	if err != nil {
		return nil, nil, err
	}
	h := http.Header{}
	sign(h, f.o.SandboxID, target, f.o.Key, f.o.Now())
	var b strings.Builder
	fmt.Fprintf(&b, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n", target, target)
	for _, k := range []string{HeaderSandbox, HeaderTime, HeaderSignature} {
		b.WriteString(k + ": " + h.Get(k) + "\r\n")
	}
	b.WriteString("\r\n")
	_ = up.SetDeadline(time.Now().Add(f.o.Timeout))
	if _, err := io.WriteString(up, b.String()); err != nil {
		up.Close()
		return nil, nil, err
	}
	_ = up.SetWriteDeadline(time.Time{})
	return up, bufio.NewReader(up), nil
}
