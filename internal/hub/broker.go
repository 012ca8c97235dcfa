package hub

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
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// PlaceholderPrefix starts the value a brokered key's variable gets in the
// sandbox: it means nothing outside.
const PlaceholderPrefix = "agentd-brokered-"

// maxSecretHeaders bounds the inject rules of one run.
const maxSecretHeaders = 16

// brokerPlan is what a run's brokered credentials come to.
type brokerPlan struct {
	inject []egressproxy.Inject
	rules  []sandboxes.BrokerRule // inject as references, for the container's label
	hosts  allowlist.List         // the brokered hosts, for the allow list
	env    []string               // NAME=agentd-brokered-… for the profile's key variables
	values map[string]string      // the --secret entries left: delivered as values
	names  []string               // what is brokered, for the record: "Authorization for api.openai.com:443"
	held   map[string][]byte      // the brokered values, redacted from activity like delivered ones
}

// planBroker checks and resolves a run's --secret-header rules and its
// profile's brokered key variables among its --secret entries, before
// anything is made. network is the run's ("public": no proxy, so nothing
// can be brokered).
func (s *Server) planBroker(ctx context.Context, p agentimage.Profile, req *hubv1.RunAgentRequest, network string) (brokerPlan, error) {
	plan := brokerPlan{values: map[string]string{}, held: map[string][]byte{}}
	for k, v := range req.GetSecrets() {
		plan.values[k] = v
	}
	headers := req.GetSecretHeaders()
	switch {
	case len(headers) > maxSecretHeaders:
		return plan, errs.New(errs.Invalid, "--secret-header: %d rules; at most %d", len(headers), maxSecretHeaders)
	case len(headers) > 0 && network == "public":
		return plan, errs.New(errs.Invalid, "--secret-header needs the hub's egress proxy, which a run with --network open does not use: give the hosts with --allow instead")
	}
	for _, h := range headers {
		in, ref, err := parseSecretHeader(h)
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
			v, ok := plan.values[b.Env]
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
			delete(plan.values, b.Env)
			plan.env = append(plan.env, b.Env+"="+PlaceholderPrefix+rand.Text()[:20])
		}
	}
	return plan, nil
}

// add resolves ref into the rule in (whose Value holds a NUL where the
// secret goes) and adds it.
func (plan *brokerPlan) add(ctx context.Context, s *Server, in egressproxy.Inject, ref, what string) error {
	for _, o := range plan.inject {
		if o.Host == in.Host && o.Port == in.Port && strings.EqualFold(o.Header, in.Header) {
			return errs.New(errs.Invalid, "%s: %s:%d has a rule for %s already", what, in.Host, in.Port, http.CanonicalHeaderKey(in.Header))
		}
	}
	if err := checkSecretRef(ref); err != nil {
		return errs.New(errs.Invalid, "%s: %v", what, err)
	}
	if s.opts.Secrets == nil {
		return errs.New(errs.Precondition, "this hub has no secret provider: start agenthub serve with --secret-dir DIR or --secret-command CMD")
	}
	b, err := s.opts.Secrets.Resolve(ctx, ref)
	switch {
	case errors.Is(err, ErrNoSecret):
		return errs.New(errs.NotFound, "%s: %v", what, err)
	case err != nil:
		return errs.New(errs.Precondition, "%s: %v", what, err)
	case len(b) == 0 || bytes.ContainsAny(b, "\x00\r\n"):
		return errs.New(errs.Precondition, "%s: the secret %s is empty or holds a line break or NUL, which no header can carry", what, ref)
	}
	plan.rules = append(plan.rules, sandboxes.BrokerRule{Host: in.Host, Port: in.Port, Header: in.Header, Template: string(in.Value), Ref: ref})
	before, after, _ := bytes.Cut(in.Value, []byte{0})
	in.Value = slices.Concat(before, b, after)
	plan.inject = append(plan.inject, in)
	plan.held[fmt.Sprintf("brokered %d", len(plan.inject))] = b
	e := allowlist.Entry{Host: in.Host, Port: in.Port}
	if !slices.Contains(plan.hosts, e) {
		plan.hosts = append(plan.hosts, e)
	}
	plan.names = append(plan.names, fmt.Sprintf("%s for %s:%d", http.CanonicalHeaderKey(in.Header), in.Host, in.Port))
	return nil
}

// hopHeaders are headers a rule may not set: they frame the message or the
// connection, or speak to the proxy.
var hopHeaders = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Upgrade",
	"Te", "Trailer", "Proxy-Authorization", "Proxy-Authenticate", "Proxy-Connection", "Expect"}

// parseSecretHeader reads HOST[:PORT]:HEADER=VALUE where VALUE holds one
// ref:PATH; the returned rule's Value has a NUL where the secret goes.
// Its errors never repeat VALUE: it may be a secret given by mistake.
func parseSecretHeader(s string) (egressproxy.Inject, string, error) {
	left, value, ok := strings.Cut(s, "=")
	i := strings.LastIndexByte(left, ':')
	if !ok || i <= 0 {
		return egressproxy.Inject{}, "", errs.New(errs.Invalid, "--secret-header %s: want HOST[:PORT]:HEADER=VALUE with ref:PATH in VALUE (api.openai.com:Authorization='Bearer ref:team/openai')", truncateRunes(left, 80))
	}
	hostport, header := left[:i], left[i+1:]
	bad := func(format string, a ...any) (egressproxy.Inject, string, error) {
		return egressproxy.Inject{}, "", errs.New(errs.Invalid, "--secret-header %s: %s", truncateRunes(left, 80), fmt.Sprintf(format, a...))
	}
	e, err := allowlist.Parse(hostport)
	switch {
	case err != nil:
		return bad("%v", err)
	case e.Wildcard:
		return bad("a rule names one host, not *.DOMAIN")
	case !agentimage.ValidHeaderName(header):
		return bad("%q is no header name", truncateRunes(header, 40))
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

// orgCAs keeps each org's CA: read from the store, made there on first
// use (one per org, whichever replica is first), parsed once.
type orgCAs struct {
	store store.Store
	now   func() time.Time

	mu  sync.Mutex
	cas map[string]*orgca.CA
}

// get returns the org's CA.
func (o *orgCAs) get(ctx context.Context, orgID string) (*orgca.CA, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ca, ok := o.cas[orgID]; ok {
		return ca, nil
	}
	c, k, err := o.store.OrgCA(ctx, orgID)
	if errors.Is(err, store.ErrNotFound) {
		org, oerr := o.store.Org(ctx, orgID)
		if oerr != nil {
			return nil, oerr
		}
		if c, k, err = orgca.Generate(org.Name, o.now()); err == nil {
			c, k, err = o.store.PutOrgCA(ctx, orgID, c, k, o.now())
		}
	}
	if err != nil {
		return nil, fmt.Errorf("org CA: %w", err)
	}
	ca, err := orgca.Parse(c, k, o.now)
	if err != nil {
		return nil, err
	}
	if o.cas == nil {
		o.cas = map[string]*orgca.CA{}
	}
	o.cas[orgID] = ca
	return ca, nil
}

// enteringNotice warns that secrets delivered as values enter the sandbox.
func enteringNotice(secrets map[string][]byte) string {
	names := slices.Sorted(maps.Keys(secrets))
	return fmt.Sprintf("warning: %s enter%s the sandbox as a value: its processes can read it and send it wherever the allow list lets them; "+
		"broker it instead with --secret-header HOST:HEADER='… ref:PATH' (the hub then sets the header outside the sandbox)",
		strings.Join(names, ", "), map[bool]string{true: "s", false: ""}[len(names) == 1])
}
