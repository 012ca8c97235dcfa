package ctl

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/metadata"

	"github.com/devdepot-ai/agentd/internal/bufpool"
	"github.com/devdepot-ai/agentd/internal/config"
	"github.com/devdepot-ai/agentd/internal/listen"
	"github.com/devdepot-ai/agentd/internal/version"
	"github.com/devdepot-ai/agentd/internal/wire"
	"github.com/devdepot-ai/agentd/transport"
)

// targetFlags say which daemon to talk to.
type targetFlags struct {
	addr      string
	hub       string
	machine   string
	env       string // with --hub: route to the sandbox for (org, env, conversation)
	conv      string // with --hub: the conversation the call belongs to
	tokenFile string
}

func (t *targetFlags) register(f *pflag.FlagSet) {
	f.StringVar(&t.addr, "addr", os.Getenv("AGENTCTL_ADDR"), "daemon address: unix:///path/agentd.sock or tcp://host:port ($AGENTCTL_ADDR)")
	f.StringVar(&t.hub, "hub", os.Getenv("AGENTD_HUB"), "hub URL, http://… or https://… ($AGENTD_HUB)")
	f.StringVar(&t.machine, "machine", os.Getenv("AGENTD_MACHINE"), "with --hub: a machine or sandbox (sb-…) id; neither --machine nor --env: the org's default environment ($AGENTD_MACHINE)")
	f.StringVar(&t.env, "env", os.Getenv("AGENTD_ENV"), "with --hub: run in a sandbox of this environment, one per conversation ($AGENTD_ENV)")
	f.StringVar(&t.conv, "conversation", os.Getenv("AGENTD_CONVERSATION"), "with --hub: the conversation the call belongs to; picks the sandbox and is recorded in activity ($AGENTD_CONVERSATION)")
	f.StringVar(&t.tokenFile, "token-file", "", "file with the bearer token (default: $AGENTD_TOKEN)")
}

// viaHub reports whether calls go through a hub (--hub without --addr).
func (a *app) viaHub() bool { return a.target.addr == "" && a.target.hub != "" }

// token returns the bearer token from --token-file or $AGENTD_TOKEN.
func (t *targetFlags) token() (string, error) {
	if t.tokenFile != "" {
		b, err := os.ReadFile(t.tokenFile)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return os.Getenv("AGENTD_TOKEN"), nil
}

// conn is an open connection to the target plus the metadata every call carries.
type conn struct {
	*grpc.ClientConn
	md metadata.MD
	// streams, through a hub reached directly (no proxy), opens the byte
	// streams a forwarded port's connections ride (see port forward).
	streams *transport.StreamDialer
}

// ctx returns ctx with the target's metadata attached.
func (c *conn) ctx(ctx context.Context) context.Context {
	if len(c.md) == 0 {
		return ctx
	}
	return metadata.NewOutgoingContext(ctx, c.md)
}

// dial opens a connection to the target the flags name.
func (a *app) dial() (*conn, error) {
	t := &a.target
	tok, err := t.token()
	if err != nil {
		return nil, err
	}
	md := metadata.MD{}
	if tok != "" {
		md.Set(wire.MDAuthorization, wire.BearerPrefix+tok)
	}
	if t.addr == "" && t.hub != "" {
		return dialHub(t, md, tok, true)
	}
	addr := t.addr
	if addr == "" {
		sock, err := config.SocketPath()
		if err != nil {
			return nil, err
		}
		addr = "unix://" + sock
	}
	la, err := listen.Parse(addr)
	if err != nil {
		return nil, usagef("--addr: %v", err)
	}
	target := la.Address
	if la.Network == "unix" {
		p, err := filepath.Abs(la.Address)
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(p); err != nil {
			if t.addr == "" {
				return nil, fmt.Errorf("no agentd socket at %s: start one with 'agentd serve --listen unix://%s', or name a target with --addr or --hub", p, p)
			}
			return nil, fmt.Errorf("no agentd socket at %s (is agentd serve running?)", p)
		}
		target = "unix://" + p
	}
	cc, err := grpc.NewClient(target, dialOpts(insecure.NewCredentials())...)
	if err != nil {
		return nil, err
	}
	return &conn{ClientConn: cc, md: md}, nil
}

// dialOpts are the options of agentctl's connection: creds, and gRPC
// buffers sized for bulk transfers (command output, large files): fewer,
// larger system calls than the default 32 KiB. agentctl holds one
// connection.
func dialOpts(creds credentials.TransportCredentials) []grpc.DialOption {
	const size = 256 << 10
	return []grpc.DialOption{grpc.WithTransportCredentials(creds), grpc.WithReadBufferSize(size), grpc.WithWriteBufferSize(size),
		experimental.WithBufferPool(bufpool.Shared())} // bulk bytes are not cleared first
}

// dialHubOnly connects to the hub itself, for its own services: the
// routing flags (--machine, --env, --conversation) are not sent.
func (a *app) dialHubOnly() (*conn, error) {
	tok, err := a.target.token()
	if err != nil {
		return nil, err
	}
	md := metadata.MD{}
	md.Set(wire.MDAuthorization, wire.BearerPrefix+tok)
	return dialHub(&a.target, md, tok, false)
}

// dialHub connects to the hub. With route, the call goes on to an agentd:
// the machine or sandbox --machine names, else a sandbox of the --env
// environment, else (neither) one of the org's default environment; the
// hub picks the sandbox by conversation.
func dialHub(t *targetFlags, md metadata.MD, tok string, route bool) (*conn, error) {
	if route && t.machine != "" && t.env != "" {
		return nil, usagef("--hub needs --machine ID or --env NAME, not both (they may come from $AGENTD_MACHINE and $AGENTD_ENV); list them with 'agentctl machines' and 'agentctl env ls'")
	}
	if tok == "" {
		return nil, errors.New("--hub needs an API token in $AGENTD_TOKEN (or --token-file); an admin creates one with 'agentctl admin token create'")
	}
	u, err := url.Parse(t.hub)
	if err != nil || u.Host == "" {
		return nil, usagef("--hub %q: want http://host:port or https://host", t.hub)
	}
	var creds credentials.TransportCredentials
	switch u.Scheme {
	case "http":
		creds = insecure.NewCredentials()
	case "https":
		creds = credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
	default:
		return nil, usagef("--hub %q: scheme must be http or https", t.hub)
	}
	host := u.Host
	if u.Port() == "" {
		if u.Scheme == "https" {
			host += ":443"
		} else {
			host += ":80"
		}
	}
	cc, err := grpc.NewClient(host, dialOpts(creds)...)
	if err != nil {
		return nil, err
	}
	c := &conn{ClientConn: cc, md: md}
	if route {
		setMD(md, wire.MDMachine, t.machine)
		setMD(md, wire.MDEnvironment, t.env)
		setMD(md, wire.MDConversation, t.conv)
		if p, err := http.ProxyFromEnvironment(&http.Request{URL: u}); err == nil && p == nil {
			c.streams = &transport.StreamDialer{URL: u, UserAgent: "agentctl/" + version.Version, Timeout: 30 * time.Second}
		}
	}
	return c, nil
}

// setMD sets key to v unless v is empty.
func setMD(md metadata.MD, key, v string) {
	if v != "" {
		md.Set(key, v)
	}
}
