package sandboxes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/egressproxy"
	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/orgca"
	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// CABundleFile is the trust bundle of a sandbox with brokered credentials
// (the hub host's roots and the org's CA); the variables of caEnv name it.
const CABundleFile = sandbox.CADir + "/bundle.pem"

// caEnv are the variables through which programs find CABundleFile:
// OpenSSL and Go (SSL_CERT_FILE), Node (NODE_EXTRA_CA_CERTS), Python's
// requests (REQUESTS_CA_BUNDLE), curl (CURL_CA_BUNDLE), git
// (GIT_SSL_CAINFO), Codex (CODEX_CA_CERTIFICATE, which it reads before
// SSL_CERT_FILE).
var caEnv = []string{"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "CODEX_CA_CERTIFICATE"}

// grantBroker sets up a new sandbox whose credentials the egress proxy
// brokers (none: only the run's variables): the trust bundle beside its
// key, read-only in the sandbox, the variables that name it, and the
// grant's inject rules and certificate source.
func (m *Manager) grantBroker(ctx context.Context, spec *sandbox.Spec, orgID, id string, env envSpec) error {
	spec.Env = append(spec.Env, env.env...)
	if len(env.inject) == 0 {
		return nil
	}
	if m.o.OrgCA == nil {
		return errs.New(errs.Precondition, "this hub cannot broker credentials (no org CA source)")
	}
	ca, err := m.o.OrgCA(ctx, orgID)
	if err != nil {
		return unavailable("the org's CA", err)
	}
	roots, err := orgca.SystemRootsPEM()
	if err != nil {
		m.log.Warn("the sandbox's trust bundle has the org's CA only", zap.Error(err))
	}
	dir := filepath.Join(m.o.KeyDir, id, "ca")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return unavailable("trust bundle", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return unavailable("trust bundle", err)
	}
	bundle := append(append(roots, '\n'), ca.CertPEM()...)
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(CABundleFile)), bundle, 0o644); err != nil {
		return unavailable("trust bundle", err)
	}
	spec.CAHostDir = dir
	if b, err := json.Marshal(env.rules); err == nil && len(env.rules) == len(env.inject) {
		spec.Labels[sandbox.LabelBroker] = string(b)
	}
	for _, k := range caEnv {
		spec.Env = append(spec.Env, k+"="+CABundleFile)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.egress[id]
	if !ok {
		return fmt.Errorf("brokered credentials for %s: the sandbox has no allow list", id)
	}
	g.inject, g.leaf = env.inject, ca.Leaf
	m.egress[id] = g
	return nil
}

// envAllowPrivate is the private destinations of a sandbox's environment
// (agentctl env set NAME --allow-private), read at each connection so that
// a change holds for the next one; none for the built-in environment and
// agent runs, or when it cannot be read (the hub's own list still holds).
func (m *Manager) envAllowPrivate(ctx context.Context, g egressGrant) egressproxy.PrivateAllow {
	if g.env == "" || g.env == BuiltinEnvironment || strings.Contains(g.env, ":") {
		return egressproxy.PrivateAllow{}
	}
	l, err := m.o.Store.EnvironmentAllowPrivate(ctx, g.org, g.env)
	if err != nil || len(l) == 0 {
		return egressproxy.PrivateAllow{}
	}
	a, err := egressproxy.ParsePrivateAllow(l)
	if err != nil {
		m.log.Warn("an environment's private destinations cannot be read", zap.String("environment", g.env), zap.Error(err))
		return egressproxy.PrivateAllow{}
	}
	return a
}

// BrokerRule is a brokered credential as its container keeps it: where the
// secret goes and its reference, never its value.
type BrokerRule struct {
	Host   string `json:"host"`
	Port   int    `json:"port"`
	Header string `json:"header"`
	// Template is the header's value with a NUL where the secret goes.
	Template string `json:"template"`
	// Ref is the secret's reference (team/openai).
	Ref string `json:"ref"`
}

// restoreBroker gives a grant read back from its container (after a hub
// restart) its brokered credentials again: the rules from the label, each
// reference resolved anew. A rule that cannot be restored leaves its host
// a plain tunnel, where the sandbox's placeholder opens nothing.
func (m *Manager) restoreBroker(ctx context.Context, g *egressGrant, labels map[string]string) {
	v := labels[sandbox.LabelBroker]
	if v == "" {
		return
	}
	var rules []BrokerRule
	err := json.Unmarshal([]byte(v), &rules)
	var ca *orgca.CA
	switch {
	case err != nil:
	case m.o.ResolveSecret == nil || m.o.OrgCA == nil:
		err = errors.New("this hub has no secret provider or no org CA")
	default:
		ca, err = m.o.OrgCA(ctx, g.org)
	}
	if err != nil {
		m.log.Warn("a sandbox's brokered credentials could not be restored", zap.Error(err))
		return
	}
	for _, r := range rules {
		b, err := m.o.ResolveSecret(ctx, r.Ref)
		if err != nil || len(b) == 0 || strings.ContainsAny(string(b), "\x00\r\n") {
			m.log.Warn("a sandbox's brokered credential could not be restored", zap.String("host", r.Host),
				zap.String("header", r.Header), zap.String("ref", r.Ref), zap.Error(err))
			continue
		}
		before, after, _ := strings.Cut(r.Template, "\x00")
		g.inject = append(g.inject, egressproxy.Inject{Host: r.Host, Port: r.Port, Header: r.Header, Value: []byte(before + string(b) + after)})
	}
	g.leaf = ca.Leaf
}

// maxAllowPrivate bounds an environment's private destinations.
const maxAllowPrivate = 64

// SetAllowPrivate replaces the private destinations a custom environment's
// sandboxes may reach through the egress proxy (entries as agenthub serve
// --egress-allow-private takes them; none clears the list). New
// connections see the new list.
func (m *Manager) SetAllowPrivate(ctx context.Context, org store.Org, name string, entries []string) error {
	if name == BuiltinEnvironment {
		return errs.New(errs.Invalid, "the built-in environment takes the hub's private destinations only (agenthub serve --egress-allow-private)")
	}
	if len(entries) > maxAllowPrivate {
		return errs.New(errs.Invalid, "--allow-private: %d entries; at most %d", len(entries), maxAllowPrivate)
	}
	a, err := egressproxy.ParsePrivateAllow(entries)
	if err != nil {
		return errs.New(errs.Invalid, "--allow-private: %v", err)
	}
	err = m.o.Store.SetEnvironmentAllowPrivate(ctx, org.ID, name, a.Strings(), m.o.Now())
	if errors.Is(err, store.ErrNotFound) {
		if len(name) > 80 {
			name = name[:80] + "…"
		}
		return errs.New(errs.NotFound, "environment %s not found in org %s; list them with 'agentctl env ls'", name, org.Name)
	}
	if err != nil {
		return unavailable("environment "+name, err)
	}
	return nil
}
