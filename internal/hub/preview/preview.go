package preview

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/devdepot-ai/agentd/internal/hub/fleet"
	"github.com/devdepot-ai/agentd/internal/hub/store"
)

// PathPrefix starts every preview URL's path: /p/<token>/….
const PathPrefix = "/p/"

// ErrOffline is Dial's error when the machine has no tunnel.
var ErrOffline = errors.New("machine is offline")

// Viewer is who a request is, as far as the hub can tell from the
// credentials it carries (a console cookie or an API token).
type Viewer struct {
	TokenID string // the API token's ID ("" for the owner's console link)
	OrgIDs  []string
	Name    string
}

// Store is what the server needs of the hub's store.
type Store interface {
	ExposureByToken(ctx context.Context, hash store.TokenHash, now time.Time) (store.Exposure, error)
}

// Upstream is a route to a machine's agentd: a connection and the
// metadata its calls carry. Done, if set, is called when a connection
// made along it ends.
type Upstream struct {
	Conn grpc.ClientConnInterface
	MD   metadata.MD
	Done func()
	// Stream, if set, offers the daemon a byte stream for each
	// connection (transport.Streams.Offer); without it, or when the
	// daemon does not take it, the bytes go in Connect's messages.
	Stream func() fleet.StreamOffer
}

// Options configures a Server. Store, Dial and Identify are required.
type Options struct {
	Store Store
	// Dial finds the route to machine id's agentd; ErrOffline if it has
	// no tunnel.
	Dial func(ctx context.Context, machineID string) (Upstream, error)
	// Identify says who r is from its credentials; ok false if it
	// carries none the hub knows.
	Identify func(r *http.Request) (v Viewer, ok bool, err error)
	// DomainURL, set, serves previews by Host too: <token>.DOMAIN, DOMAIN
	// being its host (agenthub serve --preview-domain), one origin per
	// exposure; its scheme and port are those of the URLs URL makes. Every
	// Host under DOMAIN is the preview server's: HostToken says which
	// requests those are.
	DomainURL string
	// ListenURL is the base URL of the preview listener (/p/<token>/
	// under it), for URL when there is no DomainURL.
	ListenURL string
	// PublicURL is the hub's own URL, whose host must not be under DOMAIN.
	PublicURL string
	// Strip are the cookies the hub's own (removed before forwarding).
	Strip []string
	// ClientAddr is a request's client address (behind a trusted proxy,
	// the one it names in X-Forwarded-For); default r.RemoteAddr.
	ClientAddr func(r *http.Request) string
	// Record is called once per client connection that reached an
	// exposure, when it closes.
	Record func(e store.Exposure, c ConnRecord)
	Now    func() time.Time // default time.Now
	Logger *zap.Logger      // default: none
}

// ConnRecord is one client connection's account.
type ConnRecord struct {
	Client    string // the client's address
	In, Out   int64  // bytes from and to the client
	Duration  time.Duration
	Exposures int // requests served
}

// Server serves previews; it is an http.Handler, and Serve serves it on
// a listener with per-connection accounting.
type Server struct {
	opts   Options
	domain string // DomainURL's host, lower case
	proxy  *httputil.ReverseProxy
	tr     *http.Transport
	grants grants // the preview hosts' one-time codes and sign-ins
}

// New returns a preview server; an error if DomainURL is not one or the
// hub's own host is under it.
func New(o Options) (*Server, error) {
	domain, err := domainOf(o.DomainURL, o.PublicURL)
	if err != nil {
		return nil, err
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.ClientAddr == nil {
		o.ClientAddr = func(r *http.Request) string { return r.RemoteAddr }
	}
	o.Strip = append(append([]string(nil), o.Strip...), GrantCookieNames()...)
	s := &Server{opts: o, domain: domain}
	s.tr = &http.Transport{
		DialContext:         s.dialUpstream,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     30 * time.Second,
		ForceAttemptHTTP2:   false,
	}
	s.proxy = &httputil.ReverseProxy{
		Rewrite:        s.rewrite,
		Transport:      s.tr,
		FlushInterval:  -1, // stream: SSE and chunked bodies pass as they come
		ErrorHandler:   s.upstreamError,
		ModifyResponse: s.filterResponse,
	}
	return s, nil
}

// Close closes the idle upstream connections.
func (s *Server) Close() { s.tr.CloseIdleConnections() }

type ctxKey int

const (
	keyExposure ctxKey = iota
	keyConn
	keyPath
)

// upstreamHost is the transport's name for an exposure's upstream: the
// machine and the port, which dialUpstream reads back. It only keys the
// connection pool; the dial is always to 127.0.0.1:PORT on the machine.
func upstreamHost(e store.Exposure) string {
	return e.MachineID + ".port" + strconv.Itoa(e.Port) + ".agentd.invalid"
}

// HostToken reads host (a request's Host, with or without a port) as a
// preview domain's: preview is true when it is the domain or a name under
// it, and then the request is the preview server's alone (never the
// console's or the API's). token is the exposure's token when host is
// exactly one DNS label under the domain, else "" (nothing to serve).
func (s *Server) HostToken(host string) (token string, preview bool) {
	if s.domain == "" {
		return "", false
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == s.domain {
		return "", true
	}
	label, ok := strings.CutSuffix(host, "."+s.domain)
	if !ok {
		return "", false
	}
	if !dnsLabel(label) {
		return "", true
	}
	return label, true
}

// dnsLabel reports whether l is one DNS label of a host name: 1-63
// letters, digits and inner hyphens.
func dnsLabel(l string) bool {
	if len(l) < 1 || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for _, c := range []byte(l) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// ServeHTTP serves one request: by its Host under the preview domain
// (<token>.DOMAIN/…), else by its path (/p/<token>/…).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if token, ok := s.HostToken(r.Host); ok {
		if token == "" {
			s.page(w, http.StatusNotFound, "Not a preview", "Preview URLs look like https://TOKEN."+s.domain+"/ (one name under the preview domain). Ask whoever shared this link for a new one.")
			return
		}
		s.serveToken(w, r, token, r.URL.Path)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, PathPrefix)
	if !ok {
		s.page(w, http.StatusNotFound, "Not a preview", "Preview URLs look like /p/TOKEN/. Ask whoever shared this link for a new one.")
		return
	}
	token, path, _ := strings.Cut(rest, "/")
	if path == "" && !strings.HasSuffix(rest, "/") {
		// /p/TOKEN: the page's relative links need the slash.
		http.Redirect(w, r, PathPrefix+token+"/", http.StatusMovedPermanently)
		return
	}
	s.serveToken(w, r, token, "/"+path)
}

// serveToken serves r for the exposure token names, path being the
// upstream request's path.
func (s *Server) serveToken(w http.ResponseWriter, r *http.Request, token, path string) {
	e, err := s.opts.Store.ExposureByToken(r.Context(), store.HashToken(token), s.opts.Now())
	if errors.Is(err, store.ErrNotFound) {
		s.page(w, http.StatusNotFound, "No such preview", "This preview URL is unknown, was unexposed, or has expired. Expose the port again with agentctl port expose.")
		return
	}
	if err != nil {
		s.opts.Logger.Warn("preview lookup", zap.Error(err))
		s.page(w, http.StatusServiceUnavailable, "Try again", "The hub could not look this preview up; try again in a moment.")
		return
	}
	if _, byHost := s.HostToken(r.Host); byHost && path == AuthPath {
		s.serveCode(w, r, e)
		return
	}
	status, title, msg, signIn := s.admit(r, e, token)
	if signIn != "" {
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, signIn, http.StatusSeeOther)
		return
	}
	if status != 0 {
		s.page(w, status, title, msg)
		return
	}
	if cs, ok := r.Context().Value(keyConn).(*connStats); ok {
		cs.served(e)
	}
	ctx := context.WithValue(r.Context(), keyExposure, e)
	if path == "" {
		path = "/"
	}
	out := r.WithContext(context.WithValue(ctx, keyPath, path))
	s.proxy.ServeHTTP(w, out)
}

// admit checks the exposure's access for r: 0 when r may pass, else the
// status and page to answer, or the sign-in hop's URL to send a browser
// to (a preview host's request without credentials).
func (s *Server) admit(r *http.Request, e store.Exposure, token string) (int, string, string, string) {
	if e.Access == store.AccessPublic {
		return 0, "", "", ""
	}
	v, ok, err := s.opts.Identify(r)
	if err != nil {
		s.opts.Logger.Warn("preview viewer", zap.Error(err))
		return http.StatusServiceUnavailable, "Try again", "The hub could not check who you are; try again in a moment.", ""
	}
	if _, byHost := s.HostToken(r.Host); !ok && byHost {
		// The console's cookie never reaches another site: the host's
		// own sign-in, else the hop through the console.
		if v, ok = s.hostGrant(r, e); !ok {
			if u := s.signInURL(token, r); u != "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
				return 0, "", "", u
			}
			if s.opts.PublicURL == "" {
				return http.StatusUnauthorized, "Sign in first", "This preview is " + e.Access + ": send your API token as Authorization: Bearer TOKEN. (A browser signs in through the hub's console once the hub runs with --public-url.)", ""
			}
			return http.StatusUnauthorized, "Sign in first", "This preview is " + e.Access + ": open it in a browser (a GET) to sign in through the hub's console, or send your API token as Authorization: Bearer TOKEN.", ""
		}
	}
	if !ok {
		return http.StatusUnauthorized, "Sign in first", "This preview is " + e.Access + ": sign in to the hub's console in this browser, or send your API token as Authorization: Bearer TOKEN.", ""
	}
	status, title, msg := allowed(v, e)
	return status, title, msg, ""
}

// strip removes the hub's own credentials: its cookies, and an
// Authorization carrying an API token however it is spelled (one of
// another scheme is the app's own, and passes).
func (s *Server) strip(r *http.Request) {
	if scheme, tok, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " "); ok && strings.EqualFold(scheme, "bearer") && strings.HasPrefix(strings.TrimSpace(tok), "agt_") {
		r.Header.Del("Authorization")
	}
	cookies := r.Cookies()
	r.Header.Del("Cookie")
	var keep []string
	for _, c := range cookies {
		hub := false
		for _, n := range s.opts.Strip {
			hub = hub || c.Name == n
		}
		if !hub {
			keep = append(keep, c.Name+"="+c.Value)
		}
	}
	if len(keep) > 0 {
		r.Header.Set("Cookie", strings.Join(keep, "; "))
	}
}

// rewrite makes the upstream request: to 127.0.0.1:PORT of the
// exposure (ServeHTTP put it and the path under the token in the
// context), without the hub's credentials, with X-Forwarded-* set as a
// reverse proxy does: the client's address, the host and scheme it asked
// for. What the client sent in them is not kept (the proxy removed it,
// and Forwarded goes too).
func (s *Server) rewrite(pr *httputil.ProxyRequest) {
	e := pr.In.Context().Value(keyExposure).(store.Exposure)
	pr.Out.URL.Scheme, pr.Out.URL.Host = "http", upstreamHost(e)
	pr.Out.URL.Path, pr.Out.URL.RawPath = pr.In.Context().Value(keyPath).(string), ""
	if pr.Out.URL.Path == pr.In.URL.Path {
		pr.Out.URL.RawPath = pr.In.URL.RawPath // a domain's preview: the path as sent
	}
	pr.Out.Host = "127.0.0.1:" + strconv.Itoa(e.Port)
	s.strip(pr.Out)
	pr.Out.Header.Del("Forwarded")
	client := s.opts.ClientAddr(pr.In)
	if h, _, err := net.SplitHostPort(client); err == nil {
		client = h
	}
	pr.Out.Header.Set("X-Forwarded-For", client)
	pr.Out.Header.Set("X-Forwarded-Host", pr.In.Host)
	proto := s.scheme(pr.In)
	pr.Out.Header.Set("X-Forwarded-Proto", proto)
	// The app's own pages send their own origin, which names the preview's
	// host, not the Host the app is asked by: a WebSocket library's
	// same-origin check (coder/websocket's and gorilla/websocket's
	// defaults) would refuse every browser. So the preview's own origin
	// becomes the app's; any other origin passes unchanged, for the app
	// to judge.
	if o := pr.In.Header.Get("Origin"); o != "" {
		if u, err := url.Parse(o); err == nil && u.Scheme == proto && strings.EqualFold(u.Host, pr.In.Host) && u.Path == "" {
			pr.Out.Header.Set("Origin", "http://"+pr.Out.Host)
		}
	}
}

// scheme is the scheme r's client used: https when r came over TLS, or
// when the URLs the server hands out for r's form (by host, the preview
// domain's; by path, the listener's) are https — a TLS proxy in front of
// the hub (docs/deploy.md's nginx) that speaks plain HTTP to it.
func (s *Server) scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	base := s.opts.ListenURL
	if _, byHost := s.HostToken(r.Host); byHost {
		base = s.opts.DomainURL
	}
	if strings.HasPrefix(base, "https://") {
		return "https"
	}
	return "http"
}

// dialUpstream opens a Connect call to the port addr names on its
// machine (see upstreamHost) and returns it as a net.Conn.
func (s *Server) dialUpstream(ctx context.Context, _, addr string) (net.Conn, error) {
	host, _, _ := net.SplitHostPort(addr)
	machine, rest, ok := strings.Cut(strings.TrimSuffix(host, ".agentd.invalid"), ".port")
	port, err := strconv.Atoi(rest)
	if !ok || err != nil || port < 1 || port > 65535 {
		return nil, fmt.Errorf("preview upstream %q: not one of the server's", addr)
	}
	up, err := s.opts.Dial(ctx, machine)
	if err != nil {
		return nil, err
	}
	return dialPort(context.WithoutCancel(ctx), up, uint32(port))
}

// upstreamError answers a request whose upstream failed: 503 with a page
// saying why (the machine offline, nothing listening on the port).
func (s *Server) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	e, _ := r.Context().Value(keyExposure).(store.Exposure)
	switch {
	case errors.Is(err, ErrOffline):
		s.page(w, http.StatusServiceUnavailable, "Machine offline",
			fmt.Sprintf("Machine %s is offline, so port %d cannot be reached. It is served again once the machine reconnects to the hub.", e.MachineID, e.Port))
	case errors.Is(err, context.Canceled):
		// The client went away.
	default:
		s.page(w, http.StatusBadGateway, "Port not answering",
			fmt.Sprintf("Port %d on %s did not answer: %s. Is the server running? (agentctl port ls)", e.Port, e.MachineID, err))
	}
}

var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title></head>
<body><h1>{{.Title}}</h1><p>{{.Msg}}</p></body></html>
`))

// page answers with a small HTML page of the server's own.
func (s *Server) page(w http.ResponseWriter, status int, title, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = pageTmpl.Execute(w, struct{ Title, Msg string }{title, msg})
}

// Serve serves previews on lis until ctx ends, recording each client
// connection that reached an exposure.
// With tlsConfig set, it serves HTTPS.
func (s *Server) Serve(ctx context.Context, lis net.Listener, tlsConfig *tls.Config) error {
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          zap.NewStdLog(s.opts.Logger.Named("http")),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if tc, ok := c.(*tls.Conn); ok {
				c = tc.NetConn()
			}
			if cc, ok := c.(*countedConn); ok {
				return context.WithValue(ctx, keyConn, cc.stats)
			}
			return ctx
		},
	}
	errc := make(chan error, 1)
	var l net.Listener = &countingListener{Listener: lis, s: s}
	if tlsConfig != nil {
		l = tls.NewListener(l, tlsConfig)
	}
	go func() { errc <- hs.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if hs.Shutdown(sctx) != nil {
		_ = hs.Close()
	}
	<-errc
	s.Close()
	return nil
}

// countingListener wraps each accepted connection to count its bytes.
type countingListener struct {
	net.Listener
	s *Server
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countedConn{Conn: c, stats: &connStats{s: l.s, client: c.RemoteAddr().String(), start: l.s.opts.Now()}}, nil
}

// connStats is a client connection's account.
type connStats struct {
	s       *Server
	client  string
	start   time.Time
	in, out atomic.Int64
	mu      sync.Mutex
	e       *store.Exposure // the first exposure it reached
	n       int
	once    sync.Once
}

func (cs *connStats) served(e store.Exposure) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.e == nil {
		cs.e = &e
	}
	cs.n++
}

func (cs *connStats) finish() {
	cs.once.Do(func() {
		cs.mu.Lock()
		e, n := cs.e, cs.n
		cs.mu.Unlock()
		if e != nil && cs.s.opts.Record != nil {
			cs.s.opts.Record(*e, ConnRecord{Client: cs.client, In: cs.in.Load(), Out: cs.out.Load(), Duration: cs.s.opts.Now().Sub(cs.start), Exposures: n})
		}
	})
}

type countedConn struct {
	net.Conn
	stats *connStats
}

func (c *countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.stats.in.Add(int64(n))
	return n, err
}

func (c *countedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.stats.out.Add(int64(n))
	return n, err
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.stats.finish()
	return err
}

var _ io.ReadWriteCloser = (*countedConn)(nil)

// filterResponse keeps the app from reaching beyond its own preview:
// cookies ignore ports, so a Set-Cookie naming one of the hub's cookies
// (the console's session, with or without its __Host- prefix) would sign
// the browser out of the console or plant a session there, and every
// preview of a listener shares one origin, so a service worker widened to
// "/" would see the other previews. Both are dropped.
func (s *Server) filterResponse(resp *http.Response) error {
	resp.Header.Del("Service-Worker-Allowed")
	cookies := resp.Header.Values("Set-Cookie")
	if len(cookies) == 0 {
		return nil
	}
	resp.Header.Del("Set-Cookie")
	for _, line := range cookies {
		name, _, _ := strings.Cut(line, "=")
		name = strings.TrimSpace(name)
		bare := strings.TrimPrefix(strings.TrimPrefix(name, "__Host-"), "__Secure-")
		hub := false
		for _, n := range s.opts.Strip {
			hub = hub || strings.EqualFold(name, n) || strings.EqualFold(bare, strings.TrimPrefix(strings.TrimPrefix(n, "__Host-"), "__Secure-"))
		}
		if !hub {
			resp.Header.Add("Set-Cookie", line)
		}
	}
	return nil
}
