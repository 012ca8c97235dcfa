package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/hub"
	"github.com/devdepot-ai/agentd/internal/hub/conns"
	"github.com/devdepot-ai/agentd/internal/hub/replica"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/listen"
	"github.com/devdepot-ai/agentd/internal/logging"
	"github.com/devdepot-ai/agentd/internal/units"
	"github.com/devdepot-ai/agentd/internal/version"
)

// usageError is a mistake in the command line (exit 2).
type usageError struct{ error }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "agenthub",
		Short: "The control plane for agentd: pairing, tunnels, routing, activity",
		Long: `agenthub is the self-hostable control plane for agentd. Machines pair with it
using short-lived codes and then dial out to it over a websocket tunnel; chat
back ends and agentctl reach any paired machine through it with an API token,
and every operation is recorded per org.`,
		Example: `  agenthub demo                                   # everything on loopback, scripted
  agenthub init --db /var/lib/agenthub/hub.db     # prints the owner's API token once
  agenthub serve --db /var/lib/agenthub/hub.db --listen :8443 \
      --tls-cert cert.pem --tls-key key.pem --public-url https://hub.example.com`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		Version:           version.Version,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetVersionTemplate(version.String("agenthub") + "\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newInitCmd(), newServeCmd(), newConsoleLinkCmd(), newDemoCmd(), newImageCmd(), &cobra.Command{
		Use: "version", Short: "Print the version", Args: cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), version.String("agenthub")) },
	})
	return root
}

func defaultDB() string {
	if d := os.Getenv("AGENTHUB_DB"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "agenthub", "hub.db")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "agenthub", "hub.db")
	}
	return "agenthub.db"
}

// openStore opens the Postgres store for a postgres:// URL (several hub
// replicas may share it; ?pool_max_conns=N sizes each replica's pool,
// default store.DefaultPostgresPool), else the SQLite file at db.
func openStore(ctx context.Context, db string) (store.Store, error) {
	if isPostgres(db) {
		return store.OpenPostgres(ctx, db)
	}
	if err := os.MkdirAll(filepath.Dir(db), 0o700); err != nil {
		return nil, fmt.Errorf("--db: %w", err)
	}
	return store.OpenSQLite(ctx, db)
}

func isPostgres(db string) bool {
	u, err := url.Parse(db)
	return err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql")
}

// dataDir is the directory for the hub's files beside its store: the
// SQLite file's, or for a Postgres store (which has no file here) the
// default store's ($XDG_DATA_HOME/agenthub or ~/.local/share/agenthub).
func dataDir(db string) string {
	if !isPostgres(db) {
		return filepath.Dir(db)
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "agenthub")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "agenthub")
	}
	return "agenthub"
}

// dbForLog is db without a password.
func dbForLog(db string) string {
	if u, err := url.Parse(db); err == nil && isPostgres(db) {
		return u.Redacted()
	}
	return db
}

// initHub creates the org and its owner token; it refuses a store that has orgs.
func initHub(ctx context.Context, st store.Store, org string) (string, error) {
	orgs, err := st.ListOrgs(ctx)
	if err != nil {
		return "", err
	}
	if len(orgs) > 0 {
		return "", fmt.Errorf("this hub is initialised already (org %s exists); make more tokens with 'agentctl admin token create'", orgs[0].Name)
	}
	o, err := st.CreateOrg(ctx, org, time.Now())
	if err != nil {
		return "", err
	}
	secret, hash := store.NewToken()
	if _, err := st.CreateToken(ctx, store.Token{OrgID: o.ID, Name: "owner", Role: store.RoleAdmin, Owner: true, Hash: hash, CreatedAt: time.Now()}); err != nil {
		return "", err
	}
	return secret, nil
}

func newInitCmd() *cobra.Command {
	var db, org string
	cmd := &cobra.Command{
		Use:   "init [--db PATH] [--org NAME]",
		Short: "Create the hub's store and first org; print the owner's API token once",
		Long: `Create the store (SQLite; Postgres for --db postgres://…) and the first org,
and print the hub owner's API token alone on stdout. It is shown only this
once: keep it. It is an owner token: it can create orgs and act in any of
them (agentctl admin …, with AGENTD_TOKEN set), and make more owner tokens
('agentctl admin token create --owner'). Ownership is the token's: other
admin tokens of the first org manage that org only.`,
		Example: `  export AGENTD_TOKEN=$(agenthub init --db /var/lib/agenthub/hub.db)`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := openStore(cmd.Context(), db)
			if err != nil {
				return err
			}
			defer st.Close()
			secret, err := initHub(cmd.Context(), st, org)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "Initialised %s with org %q. The owner's API token (shown once):\n", dbForLog(db), org)
			fmt.Fprintln(cmd.OutOrStdout(), secret)
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", defaultDB(), "SQLite file, or postgres://USER:PASS@HOST/DB[?pool_max_conns=N] for replicas sharing state ($AGENTHUB_DB)")
	cmd.Flags().StringVar(&org, "org", "default", "name of the first org")
	return cmd
}

func newServeCmd() *cobra.Command {
	var addr, certFile, keyFile, db, publicURL, logLevel, internalAddr, metricsAddr, previewAddr, previewDomain string
	var recordTerminalInput bool
	var maxPerClient, maxPerSandbox int
	var proxies []string
	activityKeepBytes := "256MiB"
	var sb sandboxFlags
	cmd := &cobra.Command{
		Use:   "serve [--listen :8443] [--tls-cert F --tls-key F] [--db PATH] [--public-url URL] [--docker-host URL] [--allow-registry HOST]...",
		Short: "Serve the hub: tunnels, pairing and the routed API on one port",
		Long: `Serve gRPC (the hub's services and every agentd.v1 call, routed to machines)
and HTTP (POST /v1/pair, GET /v1/tunnel, /healthz, /metrics) on one port.
A loopback address may run without TLS (http://); any other needs
--tls-cert and --tls-key.

When a Docker engine answers (--docker-host, default the local socket), the hub
also runs container sandboxes: the built-in environment (the image
ghcr.io/devdepot-ai/sandbox-base:1, built with 'make sandbox-base') and the
custom images admins add with 'agentctl env create'. Each sandbox runs a static
agentd (--agentd) as uid 1000 on a read-only root, and dials the hub over a
unix socket under --sandbox-dir. Sandboxes with network access join a network
whose egress rules the hub installs (public internet yes, private networks and
the host no); if they cannot be installed (run as root, or with
CAP_NET_ADMIN), environments that need a network are refused.
--egress-allow-private names the private destinations (an internal mirror)
sandboxes may reach anyway, through both those rules and the egress proxy.

The egress proxy of agent runs sets brokered credentials (agentctl agent run
--secret-header) itself, terminating the sandbox's TLS to those hosts with
the org's own CA and verifying the real host against the system's roots:
SSL_CERT_FILE or SSL_CERT_DIR adds a private CA there.

/metrics shows every org's calls, so on the hub's port it needs the hub
owner's API token (Authorization: Bearer agt_…); --metrics-listen serves it
without a token on a loopback address for a local Prometheus.

The web console (/console/) can open a terminal on a machine or in a
sandbox. Activity records who opened it, how it ended and the bytes each
way; --record-terminal-input records what is typed too (for every org of
this hub; the terminal page then says so).

Connections are capped per client address (--max-conns-per-client; a
--trusted-proxy is not capped) and per sandbox on its socket
(--max-conns-per-sandbox); the excess is closed at once. Raise the file
descriptor limit (LimitNOFILE in the systemd unit) with the caps.

Previews (agentctl port expose) never share the console's origin: with
--preview-domain DOMAIN each is https://TOKEN.DOMAIN/ on the hub's own port
(wildcard DNS *.DOMAIN to the hub, and a certificate for *.DOMAIN in
--tls-cert or at the reverse proxy in front; see docs/deploy.md), with
--preview-listen ADDR they are http(s)://ADDR/p/TOKEN/ on a listener of their
own. No request whose Host is under DOMAIN reaches the console or the API.
A browser opening a private or org preview under DOMAIN signs in through
the console: the preview sends it to --public-url's /console/preview-auth,
which sends it back with a one-time code for a cookie of that preview's
host (so set --public-url with --preview-domain).

A second hub on the same host needs its own --sandbox-dir (the default
follows --db), or --sandboxes off. --sandboxes off also starts a
hub with no agentd to hand (or only a dynamically linked one).

Registries an admin runs: --insecure-registry HOST[:PORT] lets the hub speak
plain http to that registry (as Docker's option; 127.0.0.0/8 needs no flag)
and allows it for custom images; --registry-ca FILE trusts a private CA for
registries' certificates. The Docker engine keeps its own settings: when it
cannot pull such an image itself, the hub reads the pinned digest and loads
it into the engine.`,
		Example: `  agenthub serve --listen 127.0.0.1:8080
  agenthub serve --listen 127.0.0.1:8080 --agentd bin/agentd --allow-registry registry.internal:5000
  agenthub serve --listen 127.0.0.1:8080 --insecure-registry mirror.lan:5000 --registry-ca /etc/ssl/corp-ca.pem
  agenthub serve --listen 127.0.0.1:8080 --egress-allow-private 10.20.0.0/16,mirror.internal --secret-dir /etc/agenthub/secrets
  agenthub serve --listen :8443 --tls-cert cert.pem --tls-key key.pem --public-url https://hub.example.com
  agenthub serve --listen :8443 --tls-cert cert.pem --tls-key key.pem --metrics-listen 127.0.0.1:9464
  agenthub serve --listen :443 --tls-cert wildcard.pem --tls-key wildcard.key --public-url https://hub.example.com --preview-domain preview.example.com`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			keepBytes, err := units.ParseBytes(activityKeepBytes)
			if err != nil || keepBytes < 1<<20 {
				return usageError{fmt.Errorf("--activity-keep-bytes %q: want a size of at least 1MiB, e.g. 256MiB or 2GiB", activityKeepBytes)}
			}
			la := listen.Addr{Network: "tcp", Address: addr}
			var tlsConfig *tls.Config
			switch {
			case certFile != "" || keyFile != "":
				cert, err := tls.LoadX509KeyPair(certFile, keyFile)
				if err != nil {
					return fmt.Errorf("--tls-cert/--tls-key: %w", err)
				}
				tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
			case !la.IsLoopback():
				return usageError{fmt.Errorf("--listen %s is reachable from other machines: give --tls-cert and --tls-key, or listen on 127.0.0.1", addr)}
			}
			if maxPerClient < 0 || maxPerSandbox < 0 {
				return usageError{errors.New("--max-conns-per-client and --max-conns-per-sandbox: want a count of connections (0: no cap)")}
			}
			if metricsAddr != "" {
				if !(listen.Addr{Network: "tcp", Address: metricsAddr}).IsLoopback() {
					return usageError{fmt.Errorf("--metrics-listen %s: /metrics without a token is for loopback only (127.0.0.1:PORT or [::1]:PORT); elsewhere scrape the hub's port with the owner's token", metricsAddr)}
				}
			}
			if previewAddr != "" && tlsConfig == nil && !(listen.Addr{Network: "tcp", Address: previewAddr}).IsLoopback() {
				return usageError{fmt.Errorf("--preview-listen %s is reachable from other machines: give --tls-cert and --tls-key (previews are served with the same certificate), or listen on 127.0.0.1", previewAddr)}
			}
			if _, err := previewDomainURL(previewDomain, publicURL, tlsConfig != nil, 0); err != nil {
				return usageError{err} // before anything is opened
			}
			log, err := logging.New(logLevel)
			if err != nil {
				return usageError{fmt.Errorf("--log-level: %w", err)}
			}
			defer log.Sync() //nolint:errcheck // stderr
			st, err := openStore(cmd.Context(), db)
			if err != nil {
				return err
			}
			defer st.Close()
			host := ""
			if publicURL != "" {
				u, err := url.Parse(publicURL)
				if err != nil || u.Host == "" {
					return usageError{fmt.Errorf("--public-url %q: want https://host[:port]", publicURL)}
				}
				host = u.Host
			}
			sbo, closeSandboxes, err := sb.options(cmd.Context(), db, log.Named("hub"))
			if err != nil {
				return err
			}
			defer closeSandboxes()
			secrets, err := sb.secrets()
			if err != nil {
				return err
			}
			if sbo.Releases, err = sb.releaseResolver(); err != nil {
				return err
			}
			trusted, err := parseProxies(proxies)
			if err != nil {
				return usageError{err}
			}
			var rep *replica.Options
			if isPostgres(db) {
				// Replicas share a Postgres store: register as one.
				rep = &replica.Options{Addr: internalAddr}
			}
			lis, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			defer lis.Close() // Serve closes it too; this is for a start that fails
			domainURL, err := previewDomainURL(previewDomain, publicURL, tlsConfig != nil, lis.Addr().(*net.TCPAddr).Port)
			if err != nil {
				return usageError{err}
			}
			var previewLis net.Listener
			previewURL := ""
			if previewAddr != "" {
				if previewLis, err = net.Listen("tcp", previewAddr); err != nil {
					return fmt.Errorf("--preview-listen: %w", err)
				}
				defer previewLis.Close()
				previewURL = previewBase(previewLis.Addr().(*net.TCPAddr), publicURL, tlsConfig != nil)
			}
			srv, err := hub.New(cmd.Context(), hub.Options{
				PreviewURL:       previewURL,
				PreviewDomainURL: domainURL,
				Store:            st, PublicHost: host, Logger: log.Named("hub"), Sandboxes: sbo, Secrets: secrets, Replica: rep,
				PublicURL:               publicURL,
				TrustedProxies:          trusted,
				MaxConnsPerClient:       noCapIsNegative(maxPerClient),
				MaxConnsPerSandbox:      noCapIsNegative(maxPerSandbox),
				ActivityKeepBytesPerOrg: keepBytes,
				RecordTerminalInput:     recordTerminalInput,
			})
			if errors.Is(err, listen.ErrInUse) {
				// Another hub took the socket since the check in options.
				return sandboxDirInUse(filepath.Dir(sbo.SocketDir), sb.dir == "", err)
			}
			if err != nil {
				return err
			}
			defer srv.Close() // Serve closes it too; this is for a listen that fails
			if metricsAddr != "" {
				metricsLis, err := net.Listen("tcp", metricsAddr)
				if err != nil {
					return fmt.Errorf("--metrics-listen: %w", err)
				}
				stop := serveMetrics(metricsLis, srv.MetricsHandler(), log.Named("metrics"))
				defer stop()
				log.Info("serving metrics", zap.String("url", "http://"+metricsLis.Addr().String()+"/metrics"))
			}
			scheme := "http"
			if tlsConfig != nil {
				scheme = "https"
			}
			if previewLis != nil {
				go func() { _ = srv.ServePreview(cmd.Context(), previewLis, tlsConfig) }()
				log.Info("serving previews", zap.String("url", previewURL))
			}
			if domainURL != "" {
				log.Info("serving previews by host name", zap.String("url", strings.Replace(domainURL, "://", "://TOKEN.", 1)+"/"))
			}
			log.Info("serving", zap.String("url", scheme+"://"+lis.Addr().String()), zap.String("console", scheme+"://"+lis.Addr().String()+"/console/"), zap.String("db", dbForLog(db)), zap.String("version", version.Version))
			if rep == nil || internalAddr == "" {
				return srv.Serve(cmd.Context(), lis, tlsConfig)
			}
			// Calls other replicas forward, on the internal address (mutual
			// TLS with the replicas' key); it stops when srv closes.
			ilis, err := net.Listen("tcp", internalAddr)
			if err != nil {
				lis.Close()
				return fmt.Errorf("--internal-addr: %w", err)
			}
			internalDone := make(chan error, 1)
			go func() { internalDone <- srv.ServeInternal(cmd.Context(), ilis) }()
			err = srv.Serve(cmd.Context(), lis, tlsConfig)
			if ierr := <-internalDone; err == nil {
				err = ierr
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "listen", ":8443", "address to listen on")
	f.StringVar(&certFile, "tls-cert", "", "TLS certificate (PEM)")
	f.StringVar(&keyFile, "tls-key", "", "TLS key (PEM)")
	f.StringVar(&db, "db", defaultDB(), "SQLite file, or postgres://USER:PASS@HOST/DB[?pool_max_conns=N] for replicas sharing state ($AGENTHUB_DB)")
	f.StringVar(&publicURL, "public-url", "", "URL daemons dial, whose host their tunnel signatures name (default: the Host header)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringArrayVar(&proxies, "trusted-proxy", nil, "address or CIDR of a reverse proxy in front of the hub whose X-Forwarded-For gives pairing clients' addresses (repeatable)")
	f.StringVar(&internalAddr, "internal-addr", "", "with a postgres:// --db: host:port to take calls forwarded by other replicas on (mutual TLS), registered for them to dial; empty: calls for machines on this replica fail elsewhere")
	f.StringVar(&previewAddr, "preview-listen", "", "host:port to serve preview URLs on (agentctl port expose), a listener of their own: previews never share the console's origin; off when empty")
	f.StringVar(&previewDomain, "preview-domain", "", "DOMAIN to serve preview URLs under, https://TOKEN.DOMAIN/ on the hub's own port (one origin per preview; needs wildcard DNS *.DOMAIN and a certificate for it, see docs/deploy.md); the URLs take --public-url's scheme and port")
	f.StringVar(&metricsAddr, "metrics-listen", "", "loopback host:port to serve /metrics on without a token (e.g. 127.0.0.1:9464); on the main port /metrics needs the hub owner's token")
	f.IntVar(&maxPerClient, "max-conns-per-client", conns.DefaultMaxConnsPerClient, "connections one client address (IPv6: its /64) may hold open; the excess is closed at once (0: no cap)")
	f.IntVar(&maxPerSandbox, "max-conns-per-sandbox", conns.DefaultMaxConnsPerSandbox, "connections one sandbox may hold open on the hub's socket: its tunnel and egress (0: no cap)")
	f.StringVar(&activityKeepBytes, "activity-keep-bytes", activityKeepBytes, "bytes of activity records kept per org (the oldest go first), beside the 100,000 records kept per org")
	f.BoolVar(&recordTerminalInput, "record-terminal-input", false, "record what people type into the console's terminals in each org's activity (the terminal page says so); off: activity has who opened which terminal, when it closed and the bytes each way, not the keystrokes")
	sb.register(f)
	return cmd
}

// noCapIsNegative turns a flag's 0 (no cap) into hub.Options' negative.
func noCapIsNegative(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// serveMetrics serves h on lis until the returned stop is called.
func serveMetrics(lis net.Listener, h http.Handler, log *zap.Logger) (stop func()) {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10, ErrorLog: zap.NewStdLog(log)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(lis)
	}()
	return func() {
		_ = hs.Close()
		<-done
	}
}

// parseProxies reads --trusted-proxy values: CIDRs, or addresses (one host).
func parseProxies(vs []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range vs {
		if p, err := netip.ParsePrefix(v); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(v)
		if err != nil {
			return nil, fmt.Errorf("--trusted-proxy %q: want an address or a CIDR (10.0.0.0/8)", v)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// previewBase is the base URL of the preview listener at addr: the host
// of --public-url (or of the address, localhost when it is unspecified)
// with the listener's port.
func previewBase(addr *net.TCPAddr, publicURL string, tls bool) string {
	scheme := "http"
	if tls {
		scheme = "https"
	}
	host := addr.IP.String()
	if addr.IP.IsUnspecified() {
		host = "localhost"
	}
	if u, err := url.Parse(publicURL); err == nil && u.Hostname() != "" {
		host = u.Hostname()
	}
	return scheme + "://" + net.JoinHostPort(host, strconv.Itoa(addr.Port))
}

// previewDomainURL is hub.Options.PreviewDomainURL for --preview-domain
// DOMAIN: the scheme and port of --public-url (the hub's port is the
// previews' too), else of the listener (https with --tls-cert; the port
// left out when it is the scheme's default). "" when domain is.
func previewDomainURL(domain, publicURL string, tls bool, port int) (string, error) {
	if domain == "" {
		return "", nil
	}
	d := strings.ToLower(strings.TrimSuffix(domain, "."))
	if strings.HasPrefix(d, "*.") || strings.Contains(d, "/") || strings.Contains(d, ":") {
		return "", fmt.Errorf("--preview-domain %q: want the bare domain, e.g. preview.example.com (no *., scheme or port: previews are https://TOKEN.preview.example.com/)", domain)
	}
	for _, l := range strings.Split(d, ".") {
		if l == "" || len(l) > 63 || strings.Trim(l, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" || l[0] == '-' || l[len(l)-1] == '-' {
			return "", fmt.Errorf("--preview-domain %q: not a DNS name", domain)
		}
	}
	scheme, p := "http", strconv.Itoa(port)
	if tls {
		scheme = "https"
	}
	if publicURL != "" {
		u, err := url.Parse(publicURL)
		if err != nil || u.Host == "" {
			return "", fmt.Errorf("--public-url %q: want https://host[:port]", publicURL)
		}
		scheme, p = u.Scheme, u.Port()
		h := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
		if h == d || strings.HasSuffix(h, "."+d) {
			return "", fmt.Errorf("--preview-domain %s: the hub's own host %s is under it, and every name there is a preview's; use a domain of its own (say preview.%s)", d, h, h)
		}
	}
	if (scheme == "https" && p == "443") || (scheme == "http" && p == "80") {
		p = ""
	}
	if p != "" {
		return scheme + "://" + net.JoinHostPort(d, p), nil
	}
	return scheme + "://" + d, nil
}
