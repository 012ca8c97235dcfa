package hub

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/pairing"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// adminService serves hubv1.AdminService.
type adminService struct {
	hubv1.UnimplementedAdminServiceServer
	s *Server
}

var _ hubv1.AdminServiceServer = (*adminService)(nil)

var orgNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// storeError maps a store error to a domain error of the same kind.
func storeError(err error, what string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return errs.New(errs.NotFound, "%s not found", what)
	case errors.Is(err, store.ErrConflict):
		return errs.New(errs.Exists, "%s: %v", what, err)
	case errors.Is(err, store.ErrInvalid):
		return errs.New(errs.Invalid, "%s: %v", what, err)
	case errors.Is(err, store.ErrPrecondition):
		return errs.New(errs.Precondition, "%s: %v", what, err)
	}
	return errs.New(errs.Unknown, "%s: %v", what, err)
}

// org resolves the org a request names ("" = the caller's). Naming another
// org needs the owner; to anyone else it does not exist.
func (a *adminService) org(ctx context.Context, name string) (*caller, store.Org, error) {
	c, _ := callerFrom(ctx)
	if name == "" || name == c.org.Name {
		return c, c.org, nil
	}
	if !c.owner {
		return c, store.Org{}, errs.New(errs.NotFound, "org %s not found", name)
	}
	o, err := a.s.store.OrgByName(ctx, name)
	if err != nil {
		return c, store.Org{}, storeError(err, "org "+name)
	}
	return c, o, nil
}

func needAdmin(c *caller) error {
	if c.token.Role != store.RoleAdmin {
		return errs.New(errs.Permission, "token %s is a member token; this needs an admin token", c.token.Name)
	}
	return nil
}

func orgProto(o store.Org) *hubv1.Org {
	return &hubv1.Org{Id: o.ID, Name: o.Name, Created: timestamppb.New(o.CreatedAt)}
}

func (a *adminService) CreateOrg(ctx context.Context, req *hubv1.CreateOrgRequest) (*hubv1.CreateOrgResponse, error) {
	c, _ := callerFrom(ctx)
	if !c.owner {
		return nil, errs.New(errs.Permission, "token %s is not an owner token; creating orgs needs one (agenthub init's, or one made with 'agentctl admin token create --owner')", c.token.Name)
	}
	if !orgNameRE.MatchString(req.GetName()) {
		return nil, errs.New(errs.Invalid, "org name %q: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", req.GetName())
	}
	o, err := a.s.store.CreateOrg(ctx, req.GetName(), a.s.opts.Now())
	if err != nil {
		return nil, storeError(err, "org "+req.GetName())
	}
	return &hubv1.CreateOrgResponse{Org: orgProto(o)}, nil
}

func (a *adminService) ListOrgs(ctx context.Context, _ *hubv1.ListOrgsRequest) (*hubv1.ListOrgsResponse, error) {
	c, _ := callerFrom(ctx)
	if !c.owner {
		return &hubv1.ListOrgsResponse{Orgs: []*hubv1.Org{orgProto(c.org)}}, nil
	}
	orgs, err := a.s.store.ListOrgs(ctx)
	if err != nil {
		return nil, storeError(err, "orgs")
	}
	resp := &hubv1.ListOrgsResponse{}
	for _, o := range orgs {
		resp.Orgs = append(resp.Orgs, orgProto(o))
	}
	slices.SortFunc(resp.Orgs, func(x, y *hubv1.Org) int { return strings.Compare(x.Name, y.Name) })
	return resp, nil
}

func roleProto(r store.Role) hubv1.Role {
	if r == store.RoleAdmin {
		return hubv1.Role_ROLE_ADMIN
	}
	return hubv1.Role_ROLE_MEMBER
}

func tokenProto(t store.Token, org string) *hubv1.Token {
	p := &hubv1.Token{Id: t.ID, Org: org, Name: t.Name, Role: roleProto(t.Role), Created: timestamppb.New(t.CreatedAt), Revoked: !t.RevokedAt.IsZero(), Owner: isOwner(t)}
	if !t.LastUsedAt.IsZero() {
		p.LastUsed = timestamppb.New(t.LastUsedAt)
	}
	return p
}

func (a *adminService) CreateToken(ctx context.Context, req *hubv1.CreateTokenRequest) (*hubv1.CreateTokenResponse, error) {
	c, org, err := a.org(ctx, req.GetOrg())
	if err != nil {
		return nil, err
	}
	if err := needAdmin(c); err != nil {
		return nil, err
	}
	role := store.RoleMember
	switch req.GetRole() {
	case hubv1.Role_ROLE_UNSPECIFIED:
		if req.GetOwner() {
			role = store.RoleAdmin // --owner implies admin
		}
	case hubv1.Role_ROLE_MEMBER:
		if req.GetOwner() {
			return nil, errs.New(errs.Invalid, "an owner token is an admin token: drop --role member, or --owner")
		}
	case hubv1.Role_ROLE_ADMIN:
		role = store.RoleAdmin
	default:
		return nil, errs.New(errs.Invalid, "role: want admin or member (--owner for an owner token)")
	}
	if req.GetOwner() && !c.owner {
		return nil, errs.New(errs.Permission, "token %s is not an owner token; only an owner token may create another", c.token.Name)
	}
	name := req.GetName()
	if name == "" {
		name = fmt.Sprintf("%s-%d", role, a.s.opts.Now().Unix())
	}
	if len(name) > 64 || !utf8Printable(name) {
		return nil, errs.New(errs.Invalid, "token name %q: at most 64 printable characters", name)
	}
	secret, hash := store.NewToken()
	t, err := a.s.store.CreateToken(ctx, store.Token{OrgID: org.ID, Name: name, Role: role, Owner: req.GetOwner(), Hash: hash, CreatedAt: a.s.opts.Now()})
	if err != nil {
		return nil, storeError(err, "token "+name)
	}
	return &hubv1.CreateTokenResponse{Token: tokenProto(t, org.Name), Secret: secret}, nil
}

func utf8Printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '\uFFFD' {
			return false
		}
	}
	return true
}

func (a *adminService) ListTokens(ctx context.Context, req *hubv1.ListTokensRequest) (*hubv1.ListTokensResponse, error) {
	c, org, err := a.org(ctx, req.GetOrg())
	if err != nil {
		return nil, err
	}
	if err := needAdmin(c); err != nil {
		return nil, err
	}
	ts, err := a.s.store.ListTokens(ctx, org.ID)
	if err != nil {
		return nil, storeError(err, "tokens")
	}
	resp := &hubv1.ListTokensResponse{}
	for _, t := range ts {
		resp.Tokens = append(resp.Tokens, tokenProto(t, org.Name))
	}
	return resp, nil
}

func (a *adminService) RevokeToken(ctx context.Context, req *hubv1.RevokeTokenRequest) (*hubv1.RevokeTokenResponse, error) {
	c, org, err := a.org(ctx, req.GetOrg())
	if err != nil {
		return nil, err
	}
	if err := needAdmin(c); err != nil {
		return nil, err
	}
	if err := a.mayRevoke(ctx, c, org, req.GetId()); err != nil {
		return nil, err
	}
	if err := a.s.store.RevokeToken(ctx, org.ID, req.GetId(), a.s.opts.Now()); err != nil {
		return nil, storeError(err, "token "+req.GetId())
	}
	return &hubv1.RevokeTokenResponse{}, nil
}

// mayRevoke refuses revoking an owner token but by an owner (an admin may
// not take the hub from its owner), and revoking the hub's last live owner
// token (then nobody could create orgs again).
func (a *adminService) mayRevoke(ctx context.Context, c *caller, org store.Org, id string) error {
	ts, err := a.s.store.ListTokens(ctx, org.ID)
	if err != nil {
		return storeError(err, "tokens")
	}
	i := slices.IndexFunc(ts, func(t store.Token) bool { return t.ID == id })
	if i < 0 || !isOwner(ts[i]) || !ts[i].RevokedAt.IsZero() {
		return nil // the store says what is not there; revoking twice is fine
	}
	if !c.owner {
		return errs.New(errs.Permission, "token %s is an owner token; only an owner token may revoke it", ts[i].Name)
	}
	orgs, err := a.s.store.ListOrgs(ctx)
	if err != nil {
		return storeError(err, "orgs")
	}
	for _, o := range orgs {
		all, err := a.s.store.ListTokens(ctx, o.ID)
		if err != nil {
			return storeError(err, "tokens")
		}
		for _, t := range all {
			if t.ID != id && isOwner(t) && t.RevokedAt.IsZero() {
				return nil
			}
		}
	}
	return errs.New(errs.Precondition, "token %s is the hub's last owner token; make another with 'agentctl admin token create --owner' first", ts[i].Name)
}

func (a *adminService) CreatePairingCode(ctx context.Context, req *hubv1.CreatePairingCodeRequest) (*hubv1.CreatePairingCodeResponse, error) {
	c, org, err := a.org(ctx, req.GetOrg())
	if err != nil {
		return nil, err
	}
	if err := needAdmin(c); err != nil {
		return nil, err
	}
	ttl := req.GetTtl().AsDuration()
	if req.GetTtl() != nil && ttl <= 0 {
		return nil, errs.New(errs.Invalid, "ttl must be positive")
	}
	code, exp, err := a.s.pairing.CreateCode(ctx, org.ID, ttl, c.token.Name)
	if err != nil {
		var pe *pairing.Error
		if errors.As(err, &pe) {
			return nil, errs.New(errs.Invalid, "%s", pe.Msg)
		}
		return nil, storeError(err, "pairing code")
	}
	return &hubv1.CreatePairingCodeResponse{Code: code, Expires: timestamppb.New(exp), Org: org.Name}, nil
}

func (a *adminService) ListMachines(ctx context.Context, req *hubv1.ListMachinesRequest) (*hubv1.ListMachinesResponse, error) {
	_, org, err := a.org(ctx, req.GetOrg())
	if err != nil {
		return nil, err
	}
	ms, err := a.s.store.ListMachines(ctx, org.ID)
	if err != nil {
		return nil, storeError(err, "machines")
	}
	online, err := a.s.onlineSet(ctx, org.ID)
	if err != nil {
		return nil, storeError(err, "routes")
	}
	resp := &hubv1.ListMachinesResponse{}
	for _, m := range ms {
		if isSandboxID(m.ID) {
			continue // 'agentctl sandbox ls' lists them
		}
		resp.Machines = append(resp.Machines, a.s.machineProto(m, org.Name, online))
	}
	slices.SortFunc(resp.Machines, func(x, y *hubv1.Machine) int { return strings.Compare(x.Name+x.Id, y.Name+y.Id) })
	return resp, nil
}

func (s *Server) machineProto(m store.Machine, org string, online func(id string) bool) *hubv1.Machine {
	p := &hubv1.Machine{Id: m.ID, Org: org, Name: m.Name, Hostname: m.Hostname, Os: m.OS, Arch: m.Arch,
		AgentdVersion: m.Version, Created: timestamppb.New(m.CreatedAt), Status: hubv1.MachineStatus_MACHINE_STATUS_OFFLINE}
	switch {
	case !m.RevokedAt.IsZero():
		p.Status = hubv1.MachineStatus_MACHINE_STATUS_REVOKED
	case online(m.ID):
		p.Status = hubv1.MachineStatus_MACHINE_STATUS_ONLINE
		p.LastSeen = timestamppb.New(s.opts.Now())
	}
	if p.LastSeen == nil && !m.LastSeenAt.IsZero() {
		p.LastSeen = timestamppb.New(m.LastSeenAt)
	}
	return p
}

// onlineSet tells whether a machine of the org has its tunnel up, on this
// hub or, for a replica, on a live replica (one query for the whole org).
func (s *Server) onlineSet(ctx context.Context, orgID string) (func(id string) bool, error) {
	remote := map[string]bool{}
	if s.fleet.ReplicaID() != "" {
		rs, err := s.fleet.Routes(ctx, orgID)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			remote[r.MachineID] = true
		}
	}
	return func(id string) bool {
		_, local := s.fleet.Get(id)
		return local || remote[id]
	}, nil
}

func (a *adminService) RevokeMachine(ctx context.Context, req *hubv1.RevokeMachineRequest) (*hubv1.RevokeMachineResponse, error) {
	c, org, err := a.org(ctx, req.GetOrg())
	if err != nil {
		return nil, err
	}
	if err := needAdmin(c); err != nil {
		return nil, err
	}
	if err := a.s.store.RevokeMachine(ctx, org.ID, req.GetId(), a.s.opts.Now()); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, errs.New(errs.NotFound, "machine %s not found in org %s", req.GetId(), org.Name)
		}
		return nil, storeError(err, "machine "+req.GetId())
	}
	a.s.fleet.CloseTunnel(req.GetId()) // the live tunnel ends now
	a.s.fleet.Revoke(ctx, req.GetId()) // and on whichever replica holds it
	return &hubv1.RevokeMachineResponse{}, nil
}
