package hub

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/machinetop"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/rpcerr"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/wire"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// environmentService is agentd.hub.v1.EnvironmentService.
type environmentService struct {
	hubv1.UnimplementedEnvironmentServiceServer
	s   *Server
	a   *adminService   // org resolution
	top *machinetop.Top // agentctl top's machines
}

var _ hubv1.EnvironmentServiceServer = (*environmentService)(nil)

// noSandboxes is the error of sandbox calls on a hub that runs none.
var noSandboxes = errs.New(errs.Precondition,
	"this hub runs no sandboxes: start agenthub serve on a host whose Docker engine it can reach (--docker-host), as root so it can install the sandboxes' egress rules")

func (v *environmentService) sandboxes() (*sandboxes.Manager, error) {
	if v.s.sandboxes == nil {
		return nil, noSandboxes
	}
	return v.s.sandboxes, nil
}

func envStateProto(s string) hubv1.EnvironmentState {
	switch s {
	case store.EnvValidating:
		return hubv1.EnvironmentState_ENVIRONMENT_STATE_VALIDATING
	case store.EnvReady:
		return hubv1.EnvironmentState_ENVIRONMENT_STATE_READY
	case store.EnvRejected:
		return hubv1.EnvironmentState_ENVIRONMENT_STATE_REJECTED
	}
	return hubv1.EnvironmentState_ENVIRONMENT_STATE_UNSPECIFIED
}

func checkStatusProto(s sandbox.CheckStatus) hubv1.CheckStatus {
	switch s {
	case sandbox.Pass:
		return hubv1.CheckStatus_CHECK_STATUS_PASS
	case sandbox.Warn:
		return hubv1.CheckStatus_CHECK_STATUS_WARN
	case sandbox.Fail:
		return hubv1.CheckStatus_CHECK_STATUS_FAIL
	}
	return hubv1.CheckStatus_CHECK_STATUS_UNSPECIFIED
}

func (v *environmentService) environmentProto(e store.Environment, def string) *hubv1.Environment {
	p := &hubv1.Environment{Name: e.Name, Kind: hubv1.EnvironmentKind_ENVIRONMENT_KIND_IMAGE, State: envStateProto(e.State),
		Image: e.Image, Pinned: e.Pinned, Reason: e.Reason, Network: e.Network, Default: e.Name == def,
		Created: timestamppb.New(e.CreatedAt), Updated: timestamppb.New(e.UpdatedAt), Isolation: e.Isolation}
	if e.Running != "" && e.State != store.EnvValidating {
		p.Reason = "revalidating: " + e.Reason
	}
	var report sandbox.Report
	if json.Unmarshal(e.Report, &report) == nil {
		for _, c := range report {
			p.Report = append(p.Report, &hubv1.Check{Id: c.ID, Status: checkStatusProto(c.Status), Title: c.Title, Breaks: c.Breaks, Fix: c.Fix})
		}
	}
	var inv sandboxes.Inventory
	if json.Unmarshal(e.Inventory, &inv) == nil && (inv.Tools != nil || inv.PythonPackages != nil) {
		p.Inventory = &hubv1.Inventory{Tools: inv.Tools, PythonPackages: inv.PythonPackages}
	}
	v.describeWorkspace(p, e.WorkspaceMax)
	return p
}

// describeWorkspace says in p what bounds an environment's /workspace
// (its own size, or the hub's).
func (v *environmentService) describeWorkspace(p *hubv1.Environment, own int64) {
	if m := v.s.sandboxes; m != nil {
		p.WorkspaceMaxBytes, p.WorkspaceBound = m.Workspace(own)
	}
}

// builtinProto describes the built-in environment.
func (v *environmentService) builtinProto(ctx context.Context, org store.Org, def string) *hubv1.Environment {
	p := &hubv1.Environment{Name: BuiltinEnvironment, Kind: hubv1.EnvironmentKind_ENVIRONMENT_KIND_BUILTIN, Default: def == BuiltinEnvironment,
		Image: sandbox.BaseImage, Network: "public", State: hubv1.EnvironmentState_ENVIRONMENT_STATE_READY}
	m := v.s.sandboxes
	if m == nil {
		p.State, p.Reason = hubv1.EnvironmentState_ENVIRONMENT_STATE_REJECTED, rpcerr.Message(noSandboxes)
		return p
	}
	o := m.Options()
	p.Image, p.Network = o.BaseImage, o.BuiltinNetwork
	if iso, err := v.s.store.BuiltinIsolation(ctx, org.ID); err == nil {
		p.Isolation = iso
	}
	image, err := m.BuiltinImage(ctx, org)
	if err != nil {
		p.State, p.Reason = hubv1.EnvironmentState_ENVIRONMENT_STATE_REJECTED, rpcerr.Message(err)
		return p
	}
	p.Pinned = image
	v.describeWorkspace(p, 0)
	return p
}

// defaultEnv returns the org's default environment's name.
func (s *Server) defaultEnv(ctx context.Context, org store.Org) (string, error) {
	d, err := s.store.DefaultEnvironment(ctx, org.ID)
	if err != nil {
		return "", errs.New(errs.Unavailable, "default environment: %v", err)
	}
	if d == "" {
		d = BuiltinEnvironment
	}
	return d, nil
}

// orgAndDefault resolves the org a request names and its default
// environment.
func (v *environmentService) orgAndDefault(ctx context.Context, name string) (store.Org, string, error) {
	_, org, err := v.a.org(ctx, name)
	if err != nil {
		return store.Org{}, "", err
	}
	def, err := v.s.defaultEnv(ctx, org)
	return org, def, err
}

func (v *environmentService) ListEnvironments(ctx context.Context, req *hubv1.ListEnvironmentsRequest) (*hubv1.ListEnvironmentsResponse, error) {
	org, def, err := v.orgAndDefault(ctx, req.GetOrg())
	if err != nil {
		return nil, err
	}
	resp := &hubv1.ListEnvironmentsResponse{Environments: []*hubv1.Environment{v.builtinProto(ctx, org, def)}}
	es, err := v.s.store.ListEnvironments(ctx, org.ID)
	if err != nil {
		return nil, storeError(err, "environments")
	}
	for _, e := range es {
		resp.Environments = append(resp.Environments, v.environmentProto(e, def))
	}
	ms, err := v.s.store.ListMachines(ctx, org.ID)
	if err != nil {
		return nil, storeError(err, "machines")
	}
	var machines []*hubv1.Environment
	for _, m := range ms {
		if isSandboxID(m.ID) || !m.RevokedAt.IsZero() {
			continue
		}
		p := &hubv1.Environment{Name: m.ID, Kind: hubv1.EnvironmentKind_ENVIRONMENT_KIND_MACHINE, Default: def == m.ID,
			Image: m.Name, State: hubv1.EnvironmentState_ENVIRONMENT_STATE_READY, Created: timestamppb.New(m.CreatedAt)}
		if _, online := v.s.fleet.Get(m.ID); !online {
			p.Reason = "offline"
		}
		machines = append(machines, p)
	}
	slices.SortFunc(machines, func(x, y *hubv1.Environment) int { return strings.Compare(x.Image+x.Name, y.Image+y.Name) })
	resp.Environments = append(resp.Environments, machines...)
	return resp, nil
}

func (v *environmentService) GetEnvironment(ctx context.Context, req *hubv1.GetEnvironmentRequest) (*hubv1.GetEnvironmentResponse, error) {
	org, def, err := v.orgAndDefault(ctx, req.GetOrg())
	if err != nil {
		return nil, err
	}
	if req.GetName() == BuiltinEnvironment {
		return &hubv1.GetEnvironmentResponse{Environment: v.withPolicy(ctx, org.ID, v.builtinProto(ctx, org, def))}, nil
	}
	e, err := v.s.store.Environment(ctx, org.ID, req.GetName())
	if errors.Is(err, store.ErrNotFound) {
		if m, merr := v.s.store.Machine(ctx, req.GetName()); merr == nil && m.OrgID == org.ID && !isSandboxID(m.ID) {
			return &hubv1.GetEnvironmentResponse{Environment: &hubv1.Environment{Name: m.ID, Kind: hubv1.EnvironmentKind_ENVIRONMENT_KIND_MACHINE,
				Image: m.Name, State: hubv1.EnvironmentState_ENVIRONMENT_STATE_READY, Default: def == m.ID}}, nil
		}
	}
	if err != nil {
		return nil, storeError(err, "environment "+req.GetName())
	}
	p := v.withPolicy(ctx, org.ID, v.environmentProto(e, def))
	p.AllowPrivate, _ = v.s.store.EnvironmentAllowPrivate(ctx, org.ID, e.Name)
	return &hubv1.GetEnvironmentResponse{Environment: p}, nil
}

// SetEnvironmentAllowPrivate: see sandboxes.Manager.SetAllowPrivate.
func (v *environmentService) SetEnvironmentAllowPrivate(ctx context.Context, req *hubv1.SetEnvironmentAllowPrivateRequest) (*hubv1.SetEnvironmentAllowPrivateResponse, error) {
	c, org, err := v.a.org(ctx, req.GetOrg())
	if err == nil {
		err = needAdmin(c)
	}
	if m, merr := v.sandboxes(); err == nil && merr == nil {
		err = m.SetAllowPrivate(ctx, org, req.GetName(), req.GetAllowPrivate())
	} else if err == nil {
		err = merr
	}
	if err != nil {
		return nil, err
	}
	resp, err := v.GetEnvironment(ctx, &hubv1.GetEnvironmentRequest{Org: req.GetOrg(), Name: req.GetName()})
	return &hubv1.SetEnvironmentAllowPrivateResponse{Environment: resp.GetEnvironment()}, err
}

func (v *environmentService) CreateEnvironment(ctx context.Context, req *hubv1.CreateEnvironmentRequest) (*hubv1.CreateEnvironmentResponse, error) {
	c, org, err := v.a.org(ctx, req.GetOrg())
	if err != nil {
		return nil, err
	}
	if err := needAdmin(c); err != nil {
		return nil, err
	}
	m, err := v.sandboxes()
	if err != nil {
		return nil, err
	}
	name, image, network := req.GetName(), strings.TrimSpace(req.GetImage()), req.GetNetwork()
	switch {
	case !orgNameRE.MatchString(name):
		return nil, errs.New(errs.Invalid, "environment name %q: want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", truncateRunes(name, 80))
	case name == BuiltinEnvironment || isSandboxID(name) || strings.HasPrefix(name, "m-"):
		return nil, errs.New(errs.Invalid, "environment name %q is reserved (builtin, and machine and sandbox ids)", name)
	case image == "":
		return nil, errs.New(errs.Invalid, "no image: give the reference with its registry host, e.g. ghcr.io/acme/sandbox:v1")
	case len(image) > 512:
		return nil, errs.New(errs.Invalid, "image reference longer than 512 characters")
	}
	if network == "" {
		network = "public"
	}
	if network != "public" && network != "none" {
		return nil, errs.New(errs.Invalid, "network %q: want public (internet, no private networks) or none", truncateRunes(network, 40))
	}
	wsMax, err := m.CheckWorkspaceMax(req.GetWorkspaceMaxBytes())
	if err != nil {
		return nil, err
	}
	isolation := req.GetIsolation()
	if isolation == "" {
		isolation = sandbox.IsolationRunc
	}
	if err := m.CheckIsolation(ctx, isolation, network); err != nil {
		return nil, err
	}
	e, err := v.s.store.CreateEnvironment(ctx, store.Environment{OrgID: org.ID, Name: name, Image: image, Network: network,
		Reason: "validation queued", CreatedAt: v.s.opts.Now(), WorkspaceMax: wsMax, Isolation: isolation})
	if err != nil {
		return nil, storeError(err, "environment "+name)
	}
	m.StartValidation(org, e)
	def, _ := v.s.defaultEnv(ctx, org)
	return &hubv1.CreateEnvironmentResponse{Environment: v.environmentProto(e, def)}, nil
}

// restart starts an update or a revalidation.
func (v *environmentService) restart(ctx context.Context, orgName, name, kind string) (*hubv1.Environment, error) {
	c, org, err := v.a.org(ctx, orgName)
	if err != nil {
		return nil, err
	}
	if err := needAdmin(c); err != nil {
		return nil, err
	}
	m, err := v.sandboxes()
	if err != nil {
		return nil, err
	}
	if name == BuiltinEnvironment {
		return nil, errs.New(errs.Invalid, "builtin is the hub's own image: rebuild it on the hub with 'make sandbox-base'")
	}
	e, err := v.s.store.StartValidation(ctx, org.ID, name, kind, v.s.opts.Now())
	if err != nil {
		return nil, storeError(err, "environment "+name)
	}
	m.StartValidation(org, e)
	def, _ := v.s.defaultEnv(ctx, org)
	return v.environmentProto(e, def), nil
}

func (v *environmentService) UpdateEnvironment(ctx context.Context, req *hubv1.UpdateEnvironmentRequest) (*hubv1.UpdateEnvironmentResponse, error) {
	e, err := v.restart(ctx, req.GetOrg(), req.GetName(), "update")
	if err != nil {
		return nil, err
	}
	return &hubv1.UpdateEnvironmentResponse{Environment: e}, nil
}

func (v *environmentService) RevalidateEnvironment(ctx context.Context, req *hubv1.RevalidateEnvironmentRequest) (*hubv1.RevalidateEnvironmentResponse, error) {
	e, err := v.restart(ctx, req.GetOrg(), req.GetName(), "revalidate")
	if err != nil {
		return nil, err
	}
	return &hubv1.RevalidateEnvironmentResponse{Environment: e}, nil
}

func (v *environmentService) SetDefaultEnvironment(ctx context.Context, req *hubv1.SetDefaultEnvironmentRequest) (*hubv1.SetDefaultEnvironmentResponse, error) {
	c, org, err := v.a.org(ctx, req.GetOrg())
	if err != nil {
		return nil, err
	}
	if err := needAdmin(c); err != nil {
		return nil, err
	}
	name := req.GetName()
	if name != BuiltinEnvironment {
		if _, err := v.s.store.Environment(ctx, org.ID, name); err != nil {
			m, merr := v.s.store.Machine(ctx, name)
			if merr != nil || m.OrgID != org.ID || isSandboxID(name) || !m.RevokedAt.IsZero() {
				return nil, errs.New(errs.NotFound, "environment %s not found in org %s; list them with 'agentctl env ls'", truncateRunes(name, 80), org.Name)
			}
		}
	}
	if err := v.s.store.SetDefaultEnvironment(ctx, org.ID, name); err != nil {
		return nil, storeError(err, "default environment")
	}
	return &hubv1.SetDefaultEnvironmentResponse{}, nil
}

func (v *environmentService) DeleteEnvironment(ctx context.Context, req *hubv1.DeleteEnvironmentRequest) (*hubv1.DeleteEnvironmentResponse, error) {
	c, org, err := v.a.org(ctx, req.GetOrg())
	if err != nil {
		return nil, err
	}
	if err := needAdmin(c); err != nil {
		return nil, err
	}
	if req.GetName() == BuiltinEnvironment {
		return nil, errs.New(errs.Invalid, "builtin cannot be removed; make another environment the default with 'agentctl env default NAME'")
	}
	if err := v.s.store.DeleteEnvironment(ctx, org.ID, req.GetName()); err != nil {
		return nil, storeError(err, "environment "+req.GetName())
	}
	var n sandboxes.Removed
	if m := v.s.sandboxes; m != nil {
		n = m.RemoveEnvironment(ctx, org.ID, req.GetName())
	}
	return &hubv1.DeleteEnvironmentResponse{Sandboxes: int32(n.Sandboxes), Stopped: int32(n.Stopped), Archived: int32(n.Archived)}, nil
}

// SetEnvironmentIsolation sets an environment's isolation, once the
// engine can run it, and replaces its sandboxes.
func (v *environmentService) SetEnvironmentIsolation(ctx context.Context, req *hubv1.SetEnvironmentIsolationRequest) (*hubv1.SetEnvironmentIsolationResponse, error) {
	c, org, err := v.a.org(ctx, req.GetOrg())
	if err != nil {
		return nil, err
	}
	if err := needAdmin(c); err != nil {
		return nil, err
	}
	m, err := v.sandboxes()
	if err != nil {
		return nil, err
	}
	name, isolation := req.GetName(), req.GetIsolation()
	def, err := v.s.defaultEnv(ctx, org)
	if err != nil {
		return nil, err
	}
	if name == BuiltinEnvironment {
		if err := m.CheckIsolation(ctx, isolation, m.Options().BuiltinNetwork); err != nil {
			return nil, err
		}
		if now, err := v.s.store.BuiltinIsolation(ctx, org.ID); err != nil {
			return nil, storeError(err, "environment builtin")
		} else if now == isolation {
			// Already so: its sandboxes, and their workspaces, stay.
			return &hubv1.SetEnvironmentIsolationResponse{Environment: v.builtinProto(ctx, org, def)}, nil
		}
		if err := v.s.store.SetBuiltinIsolation(ctx, org.ID, isolation); err != nil {
			return nil, storeError(err, "environment builtin")
		}
		m.RetireEnvironment(ctx, org.ID, name, "its environment's isolation is now "+isolation)
		return &hubv1.SetEnvironmentIsolationResponse{Environment: v.builtinProto(ctx, org, def)}, nil
	}
	e, err := v.s.store.Environment(ctx, org.ID, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errs.New(errs.NotFound, "environment %s not found in org %s (a machine has no isolation to set); list them with 'agentctl env ls'", truncateRunes(name, 80), org.Name)
	}
	if err != nil {
		return nil, storeError(err, "environment "+name)
	}
	if err := m.CheckIsolation(ctx, isolation, e.Network); err != nil {
		return nil, err
	}
	if e.Isolation == isolation {
		// Already so: its sandboxes, and their workspaces, stay.
		return &hubv1.SetEnvironmentIsolationResponse{Environment: v.environmentProto(e, def)}, nil
	}
	e, err = v.s.store.SetEnvironmentIsolation(ctx, org.ID, name, isolation, v.s.opts.Now())
	if err != nil {
		return nil, storeError(err, "environment "+name)
	}
	m.RetireEnvironment(ctx, org.ID, name, "its environment's isolation is now "+isolation)
	return &hubv1.SetEnvironmentIsolationResponse{Environment: v.environmentProto(e, def)}, nil
}

func (v *environmentService) ListSandboxes(ctx context.Context, req *hubv1.ListSandboxesRequest) (*hubv1.ListSandboxesResponse, error) {
	_, org, err := v.a.org(ctx, req.GetOrg())
	if err != nil {
		return nil, err
	}
	sbs, err := v.s.store.ListSandboxes(ctx, org.ID)
	if err != nil {
		return nil, storeError(err, "sandboxes")
	}
	// Online on any replica: every replica lists them all alike.
	isOnline, err := v.s.onlineSet(ctx, org.ID)
	if err != nil {
		return nil, storeError(err, "routes")
	}
	resp := &hubv1.ListSandboxesResponse{}
	for _, sb := range sbs {
		if req.GetEnvironment() != "" && sb.Environment != req.GetEnvironment() {
			continue
		}
		online := isOnline(sb.ID)
		state := "starting"
		switch {
		case sb.State == store.SandboxPaused || sb.State == store.SandboxStopped || sb.State == store.SandboxArchived:
			state = sb.State
		case online:
			state = "running"
		case sb.ContainerID != "" && v.s.opts.Now().Sub(sb.CreatedAt) > 2*v.startTimeout():
			state = "stopped"
		}
		conv := sb.Conversation
		if strings.HasPrefix(conv, sandboxes.ValidationConversation) {
			conv = "(validation)"
		}
		p := &hubv1.Sandbox{Id: sb.ID, Environment: sb.Environment, Conversation: conv, State: state,
			Image: sb.Image, Online: online, Created: timestamppb.New(sb.CreatedAt), LastUsed: timestamppb.New(sb.LastUsedAt)}
		if !sb.ExpiresAt.IsZero() {
			p.Expires = timestamppb.New(sb.ExpiresAt)
		}
		p.StateReason, p.WorkspaceBytes = sb.StateReason, sb.WorkspaceBytes
		if !sb.WorkspaceAt.IsZero() {
			p.WorkspaceMeasured = timestamppb.New(sb.WorkspaceAt)
		}
		if m := v.s.sandboxes; m != nil {
			st := m.Status(ctx, sb)
			p.LastUsed, p.NextStep = timestamppb.New(st.LastUsed), st.Next
			if e, err := m.StoredEgress(ctx, sb.ID); err == nil { // none: no list
				p.Egress = egressProto(e)
			}
		}
		resp.Sandboxes = append(resp.Sandboxes, p)
	}
	return resp, nil
}

func (v *environmentService) startTimeout() time.Duration {
	if v.s.sandboxes == nil {
		return time.Minute
	}
	return v.s.sandboxes.Options().StartTimeout
}

func (v *environmentService) RemoveSandbox(ctx context.Context, req *hubv1.RemoveSandboxRequest) (*hubv1.RemoveSandboxResponse, error) {
	c, org, err := v.a.org(ctx, req.GetOrg())
	if err != nil {
		return nil, err
	}
	if err := needAdmin(c); err != nil {
		return nil, err
	}
	m, err := v.sandboxes()
	if err != nil {
		return nil, err
	}
	if err := m.Remove(ctx, org, req.GetId()); err != nil {
		return nil, err
	}
	return &hubv1.RemoveSandboxResponse{}, nil
}

// truncateRunes cuts s to at most n runes for an error message.
func truncateRunes(s string, n int) string {
	r := []rune(s)
	if len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// recordRefusal adds an activity record of a call an environment refused to
// the org's stream (recordHub).
func (s *Server) recordRefusal(ctx context.Context, org store.Org, actor, conv, env, method string, refusal error) {
	msg := rpcerr.Message(refusal)
	s.recordHub(ctx, org, &agentdv1.ActivityRecord{Actor: actor, Conversation: conv,
		Kind: wire.KindEnvironmentRefused, Summary: "refused " + method + ": " + msg, Outcome: agentdv1.Outcome_OUTCOME_ERROR, Error: msg, ObjectId: truncateRunes(env, 100)})
}

// recordHub adds an activity record of the hub's own (a refusal, an agent
// run) to the org's stream (activitylog.Recorder.Record).
func (s *Server) recordHub(ctx context.Context, org store.Org, r *agentdv1.ActivityRecord) {
	s.activity.Record(ctx, org.ID, "", r)
}
