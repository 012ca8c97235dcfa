// Package broker turns a run's brokered credentials — --secret-header rules
// and a profile's key variables among its secrets — into the egress
// proxy's inject rules, resolving every reference before any sandbox is
// made, and keeps each org's CA (made once, in the store). docs/design.md,
// "Brokered credentials", says why and what the sandbox sees.
package broker

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/devdepot-ai/agentd/internal/agentimage"
	"github.com/devdepot-ai/agentd/internal/allowlist"
	"github.com/devdepot-ai/agentd/internal/egressproxy"
	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/orgca"
)

// PlaceholderPrefix starts the value a brokered key's variable gets in the
// sandbox: it means nothing outside.
const PlaceholderPrefix = "agentd-brokered-"

// maxSecretHeaders bounds the inject rules of one run.
const maxSecretHeaders = 16

// Plan is what a run's brokered credentials come to.
type Plan struct {
	Inject []egressproxy.Inject
	Rules  []sandboxes.BrokerRule // Inject as references, for the container's label
	Hosts  allowlist.List         // the brokered hosts, for the allow list
	Env    []string               // NAME=agentd-brokered-… for the profile's key variables
	Values map[string]string      // the --secret entries left: delivered as values
	Names  []string               // what is brokered, for the record: "Authorization for api.openai.com:443"
	Held   map[string][]byte      // the brokered values, redacted from activity like delivered ones
}

// Resolver resolves a secret reference; errors.Is(err, NotFound) for one
// the provider does not have.
type Resolver struct {
	Resolve  func(ctx context.Context, ref string) ([]byte, error)
	NotFound error
}

// New checks and resolves a run's --secret-header rules (headers) and its
// profile's brokered key variables among its --secret entries (secrets),
// before anything is made. network is the run's ("public": no proxy, so
// nothing can be brokered).
func New(ctx context.Context, s Resolver, p agentimage.Profile, secrets map[string]string, headers []string, network string) (Plan, error) {
	plan := Plan{Values: maps.Clone(secrets), Held: map[string][]byte{}}
	if plan.Values == nil {
		plan.Values = map[string]string{}
	}
	switch {
	case len(headers) > maxSecretHeaders:
		return plan, errs.New(errs.Invalid, "--secret-header: %d rules; at most %d", len(headers), maxSecretHeaders)
	case len(headers) > 0 && network == "public":
		return plan, errs.New(errs.Invalid, "--secret-header needs the hub's egress proxy, which a run with --network open does not use: give the hosts with --allow instead")
	}
	for _, h := range headers {
		in, ref, err := ParseHeader(h)
		if err != nil {
			return plan, err
		}
		if err := plan.add(ctx, s, in, ref, "--secret-header "+in.Host+":"+in.Header); err != nil {
			return plan, err
		}
	}
	if network != "public" {
		// The profile's key variables the run names are brokered, not
		// delivered; with --network open there is no proxy to do it.
		for _, b := range p.Brokered {
			v, ok := plan.Values[b.Env]
			if !ok {
				continue
			}
			ref, ok := strings.CutPrefix(v, "ref:")
			if !ok {
				return plan, errs.New(errs.Invalid, "secret %s: give a reference, ref:PATH (e.g. ref:team/openai), never the value", b.Env)
			}
			e, _ := allowlist.Parse(b.Host) // checked when the profile was loaded
			before, after, _ := strings.Cut(b.Format, agentimage.SecretMarker)
			in := egressproxy.Inject{Host: e.Host, Port: e.Port, Header: b.Header, Value: []byte(before + "\x00" + after)}
			if err := plan.add(ctx, s, in, ref, "secret "+b.Env); err != nil {
				return plan, err
			}
			delete(plan.Values, b.Env)
			plan.Env = append(plan.Env, b.Env+"="+PlaceholderPrefix+rand.Text()[:20])
		}
	}
	return plan, nil
}

// add resolves ref into the rule in (whose Value holds a NUL where the
// secret goes) and adds it.
func (plan *Plan) add(ctx context.Context, s Resolver, in egressproxy.Inject, ref, what string) error {
	for _, o := range plan.Inject {
		if o.Host == in.Host && o.Port == in.Port && strings.EqualFold(o.Header, in.Header) {
			return errs.New(errs.Invalid, "%s: %s:%d has a rule for %s already", what, in.Host, in.Port, http.CanonicalHeaderKey(in.Header))
		}
	}
	if s.Resolve == nil {
		return errs.New(errs.Precondition, "this hub has no secret provider: start agenthub serve with --secret-dir DIR or --secret-command CMD")
	}
	b, err := s.Resolve(ctx, ref) // which checks the reference
	switch {
	case s.NotFound != nil && errors.Is(err, s.NotFound):
		return errs.New(errs.NotFound, "%s: %v", what, err)
	case err != nil:
		return errs.New(errs.Precondition, "%s: %v", what, err)
	case len(b) == 0 || bytes.ContainsAny(b, "\x00\r\n"):
		return errs.New(errs.Precondition, "%s: the secret %s is empty or holds a line break or NUL, which no header can carry", what, ref)
	}
	plan.Rules = append(plan.Rules, sandboxes.BrokerRule{Host: in.Host, Port: in.Port, Header: in.Header, Template: string(in.Value), Ref: ref})
	before, after, _ := bytes.Cut(in.Value, []byte{0})
	in.Value = slices.Concat(before, b, after)
	plan.Inject = append(plan.Inject, in)
	plan.Held[fmt.Sprintf("brokered %d", len(plan.Inject))] = b
	e := allowlist.Entry{Host: in.Host, Port: in.Port}
	if !slices.Contains(plan.Hosts, e) {
		plan.Hosts = append(plan.Hosts, e)
	}
	plan.Names = append(plan.Names, fmt.Sprintf("%s for %s:%d", http.CanonicalHeaderKey(in.Header), in.Host, in.Port))
	return nil
}

// hopHeaders are headers a rule may not set: they frame the message or the
// connection, or speak to the proxy.
var hopHeaders = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Upgrade",
	"Te", "Trailer", "Proxy-Authorization", "Proxy-Authenticate", "Proxy-Connection", "Expect"}

// ParseHeader reads HOST[:PORT]:HEADER=VALUE where VALUE holds one
// ref:PATH; the returned rule's Value has a NUL where the secret goes.
// Its errors never repeat VALUE: it may be a secret given by mistake.
func ParseHeader(s string) (egressproxy.Inject, string, error) {
	left, value, ok := strings.Cut(s, "=")
	i := strings.LastIndexByte(left, ':')
	if !ok || i <= 0 {
		return egressproxy.Inject{}, "", errs.New(errs.Invalid, "--secret-header %s: want HOST[:PORT]:HEADER=VALUE with ref:PATH in VALUE (api.openai.com:Authorization='Bearer ref:team/openai')", truncate(left, 80))
	}
	hostport, header := left[:i], left[i+1:]
	bad := func(format string, a ...any) (egressproxy.Inject, string, error) {
		return egressproxy.Inject{}, "", errs.New(errs.Invalid, "--secret-header %s: %s", truncate(left, 80), fmt.Sprintf(format, a...))
	}
	e, err := allowlist.Parse(hostport)
	switch {
	case err != nil:
		return bad("%v", err)
	case e.Wildcard:
		return bad("a rule names one host, not *.DOMAIN")
	case !agentimage.ValidHeaderName(header):
		return bad("%q is no header name", truncate(header, 40))
	case slices.ContainsFunc(hopHeaders, func(h string) bool { return strings.EqualFold(h, header) }):
		return bad("%s is not a header a rule may set (it frames the message or the connection)", header)
	case strings.ContainsAny(value, "\x00\r\n"):
		return bad("the value holds a line break or NUL")
	}
	at := strings.Index(value, "ref:")
	if at < 0 || strings.Count(value, "ref:") != 1 {
		return bad("the value must hold one ref:PATH, which the hub resolves (never the secret itself)")
	}
	end := at + len("ref:")
	for end < len(value) && strings.IndexByte("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-/", value[end]) >= 0 {
		end++
	}
	ref := value[at+len("ref:") : end]
	if ref == "" {
		return bad("ref: names no secret")
	}
	return egressproxy.Inject{Host: e.Host, Port: e.Port, Header: header, Value: []byte(value[:at] + "\x00" + value[end:])}, ref, nil
}

// Store is what CAs needs of the hub's store.
type Store interface {
	Org(ctx context.Context, id string) (store.Org, error)
	OrgCA(ctx context.Context, orgID string) (certPEM, keyPEM []byte, err error)
	PutOrgCA(ctx context.Context, orgID string, certPEM, keyPEM []byte, at time.Time) ([]byte, []byte, error)
}

// CAs keeps each org's CA: read from the store, made there on first use
// (one per org, whichever replica is first), parsed once.
type CAs struct {
	Store Store
	Now   func() time.Time

	mu  sync.Mutex
	cas map[string]*orgca.CA
}

// Get returns the org's CA.
func (o *CAs) Get(ctx context.Context, orgID string) (*orgca.CA, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ca, ok := o.cas[orgID]; ok {
		return ca, nil
	}
	c, k, err := o.Store.OrgCA(ctx, orgID)
	if errors.Is(err, store.ErrNotFound) {
		org, oerr := o.Store.Org(ctx, orgID)
		if oerr != nil {
			return nil, oerr
		}
		if c, k, err = orgca.Generate(org.Name, o.Now()); err == nil {
			c, k, err = o.Store.PutOrgCA(ctx, orgID, c, k, o.Now())
		}
	}
	if err != nil {
		return nil, fmt.Errorf("org CA: %w", err)
	}
	ca, err := orgca.Parse(c, k, o.Now)
	if err != nil {
		return nil, err
	}
	if o.cas == nil {
		o.cas = map[string]*orgca.CA{}
	}
	o.cas[orgID] = ca
	return ca, nil
}

// EnteringNotice warns that secrets delivered as values enter the sandbox
// (none: no notice).
func EnteringNotice(secrets map[string][]byte) []string {
	if len(secrets) == 0 {
		return nil
	}
	names := slices.Sorted(maps.Keys(secrets))
	return []string{fmt.Sprintf("warning: %s enter%s the sandbox as a value: its processes can read it and send it wherever the allow list lets them; "+
		"broker it instead with --secret-header HOST:HEADER='… ref:PATH' (the hub then sets the header outside the sandbox)",
		strings.Join(names, ", "), map[bool]string{true: "s", false: ""}[len(names) == 1])}
}

// truncate cuts s to at most n runes, marking the cut.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
