// Package hubtest runs real hubs for tests: a SQLite store in a temporary
// directory (or a store the test gives, such as a Postgres database) with
// one org and an admin token, and a hub serving it on a loopback port,
// which can be stopped and served again on the same address (a hub
// restart). Replica starts another hub on the same store, as hub replicas
// behind a load balancer share one database.
package hubtest

import (
	"context"
	"crypto/tls"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/devdepot-ai/agentd/internal/hub"
	"github.com/devdepot-ai/agentd/internal/hub/activitylog"
	"github.com/devdepot-ai/agentd/internal/hub/replica"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
)

// Options configures a Hub. Zero fields get defaults in Start.
type Options struct {
	Org    string      // name of the org made at the start; default "acme"
	Actor  string      // name of its admin token (the actor in activity); default "tester"
	Logger *zap.Logger // the hub's logger; default a zaptest logger named "hub"
	TLS    *tls.Config // set: the hub serves TLS with it
	// Sandboxes, with a Driver, makes the hub run container sandboxes.
	Sandboxes sandboxes.Options
	// Now is the hub's clock; default time.Now.
	Now func() time.Time
	// Secrets resolves agent runs' secret references; nil: none.
	Secrets hub.SecretResolver
	// RecordTerminalInput is the hub's (see hub.Options).
	RecordTerminalInput bool
	// Store is the store to serve, which the test closes; default a new
	// SQLite file, closed when the test ends.
	Store store.Store
	// Heartbeat is the hub's heartbeat (see hub.Options); default the hub's.
	Heartbeat time.Duration
	// Replica, set, makes each hub a replica (see hub.Options); each gets
	// an ID of its own unless the options name one.
	Replica *replica.Options
	// MaxConnsPerClient is the hub's (see hub.Options): benchmarks with
	// many daemons on one address set it negative (no cap).
	MaxConnsPerClient int
	// ActivityLimits and ActivityKeepBytesPerOrg: see hub.Options;
	// default the hub's.
	ActivityLimits          activitylog.Limits
	ActivityKeepBytesPerOrg int64
	// Preview, set, serves the hub's preview server on a loopback port of
	// its own (Hub.PreviewURL), as agenthub serve --preview-listen does.
	Preview bool
	// PreviewDomain, set, serves previews at http://<token>.PreviewDomain:PORT/
	// on the hub's own port, as agenthub serve --preview-domain does (a
	// test resolves the names to the hub: a Host header, or a browser's
	// host resolver rule).
	PreviewDomain string
	// PreviewDomainURL, with PreviewDomain, is the base of the preview
	// URLs expose prints instead of http://PreviewDomain:PORT (a test
	// with a TLS proxy in front: https://PreviewDomain:PROXYPORT).
	PreviewDomainURL string
	// PublicURL is the hub's own URL (hub.Options.PublicURL); default
	// with PreviewDomain: the hub's http://Addr.
	PublicURL string
	// TrustedProxies are the hub's (agenthub serve --trusted-proxy).
	TrustedProxies []netip.Prefix
}

// Hub is a hub serving on a loopback port, stopped when the test ends.
type Hub struct {
	Store store.Store
	Org   store.Org
	Token string // the admin token of Org
	Addr  string // host:port it listens on
	// Server is the hub being served (a new one after each Serve).
	Server *hub.Server
	URL    string // http://Addr, or https:// with TLS
	// PreviewURL is the preview server's base URL (Options.Preview).
	PreviewURL string

	tb   testing.TB
	opts Options
	stop func()
}

// Start makes the store, the org and its token (an owner token, as
// agenthub init makes), and serves a hub on a free loopback port.
func Start(tb testing.TB, opts Options) *Hub {
	tb.Helper()
	if opts.Org == "" {
		opts.Org = "acme"
	}
	if opts.Actor == "" {
		opts.Actor = "tester"
	}
	if opts.Logger == nil {
		opts.Logger = zaptest.NewLogger(tb).Named("hub")
	}
	ctx := tb.Context()
	st := opts.Store
	if st == nil {
		sq, err := store.OpenSQLite(ctx, filepath.Join(tb.TempDir(), "hub.db"))
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { sq.Close() })
		st = sq
	}
	o, err := st.CreateOrg(ctx, opts.Org, time.Now())
	if err != nil {
		tb.Fatal(err)
	}
	secret, hash := store.NewToken()
	if _, err := st.CreateToken(ctx, store.Token{OrgID: o.ID, Name: opts.Actor, Role: store.RoleAdmin, Owner: true, Hash: hash, CreatedAt: time.Now()}); err != nil {
		tb.Fatal(err)
	}
	h := &Hub{Store: st, Org: o, Token: secret, tb: tb, opts: opts}
	h.Serve("127.0.0.1:0")
	return h
}

// Replica serves another hub on st (nil: h's store), which must hold the
// same database as h's, with h's org and token, on a port of its own: a
// second replica of the same control plane.
func (h *Hub) Replica(st store.Store) *Hub {
	h.tb.Helper()
	if st == nil {
		st = h.Store
	}
	r := &Hub{Store: st, Org: h.Org, Token: h.Token, tb: h.tb, opts: h.opts}
	r.Serve("127.0.0.1:0")
	return r
}

// ReplicaWith is Replica with options of its own: tune changes a copy of
// h's (say, sandboxes on a socket and hub ID of the replica's own, as
// replicas on two hosts have).
func (h *Hub) ReplicaWith(st store.Store, tune func(*Options)) *Hub {
	h.tb.Helper()
	if st == nil {
		st = h.Store
	}
	opts := h.opts
	tune(&opts)
	r := &Hub{Store: st, Org: h.Org, Token: h.Token, tb: h.tb, opts: opts}
	r.Serve("127.0.0.1:0")
	return r
}

// Serve starts a hub on addr: after Stop, the same address again is a
// restart (the old socket may linger a moment; Serve retries for a second).
func (h *Hub) Serve(addr string) {
	h.tb.Helper()
	var (
		rep  *replica.Options
		ilis net.Listener
	)
	if h.opts.Replica != nil {
		// A replica takes forwarded calls on an internal port of its own.
		var err error
		if ilis, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			h.tb.Fatal(err)
		}
		o := *h.opts.Replica
		o.Addr = ilis.Addr().String()
		rep = &o
	}
	var plis net.Listener
	if h.opts.Preview {
		var err error
		if plis, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			h.tb.Fatal(err)
		}
		h.PreviewURL = "http://" + plis.Addr().String()
	}
	var (
		lis net.Listener
		err error
	)
	for i := 0; ; i++ {
		lis, err = net.Listen("tcp", addr)
		if err == nil || i > 50 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		h.tb.Fatal(err)
	}
	domainURL, publicURL := "", ""
	if h.opts.PreviewDomain != "" {
		domainURL = "http://" + net.JoinHostPort(h.opts.PreviewDomain, strconv.Itoa(lis.Addr().(*net.TCPAddr).Port))
		publicURL = "http://" + lis.Addr().String() // where a preview's sign-in hop goes
		if h.opts.PreviewDomainURL != "" {
			domainURL = h.opts.PreviewDomainURL
		}
	}
	if h.opts.PublicURL != "" {
		publicURL = h.opts.PublicURL
	}
	srv, err := hub.New(h.tb.Context(), hub.Options{
		PreviewURL: h.PreviewURL, PreviewDomainURL: domainURL, PublicURL: publicURL,
		Store: h.Store, Logger: h.opts.Logger, Sandboxes: h.opts.Sandboxes, Now: h.opts.Now, Secrets: h.opts.Secrets,
		RecordTerminalInput: h.opts.RecordTerminalInput,
		Heartbeat:           h.opts.Heartbeat, Replica: rep, MaxConnsPerClient: h.opts.MaxConnsPerClient,
		ActivityLimits: h.opts.ActivityLimits, ActivityKeepBytesPerOrg: h.opts.ActivityKeepBytesPerOrg,
		TrustedProxies: h.opts.TrustedProxies,
	})
	if err != nil {
		lis.Close()
		h.tb.Fatal(err)
	}
	h.Server = srv
	h.Addr = lis.Addr().String()
	h.URL = "http://" + h.Addr
	if h.opts.TLS != nil {
		h.URL = "https://" + h.Addr
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	n := 1
	go func() { done <- srv.Serve(ctx, lis, h.opts.TLS) }()
	if ilis != nil {
		n++
		go func() { done <- srv.ServeInternal(ctx, ilis) }()
	}
	if plis != nil {
		n++
		go func() { done <- srv.ServePreview(ctx, plis, nil) }()
	}
	var once sync.Once
	h.stop = func() {
		once.Do(func() {
			cancel()
			for range n {
				<-done
			}
		})
	}
	h.tb.Cleanup(h.stop)
}

// Stop stops the hub (its tunnels close going-away) and waits for it.
func (h *Hub) Stop() { h.stop() }
