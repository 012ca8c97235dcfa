package hub

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/devdepot-ai/agentd/internal/agentimage"
	"github.com/devdepot-ai/agentd/internal/agentimage/imagebuild"
	"github.com/devdepot-ai/agentd/internal/allowlist"
	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/broker"
	"github.com/devdepot-ai/agentd/internal/hub/releases"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/imageref"
	"github.com/devdepot-ai/agentd/internal/rpcerr"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/wire"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// agentService serves hubv1.AgentService: coding agents in disposable
// sandboxes, one per run, from the profiles in sandboxes.Options.Agents.
type agentService struct {
	hubv1.UnimplementedAgentServiceServer
	s *Server
	a *adminService
}

var _ hubv1.AgentServiceServer = (*agentService)(nil)

// agentEnvPrefix starts the environment name of an agent run's sandbox
// ("agent:codex"): no environment can have it (names have no ':').
const agentEnvPrefix = "agent:"

// TTL bounds of a run, as the profiles' own.
const (
	minAgentTTL = time.Minute
	maxAgentTTL = 24 * time.Hour
)

func (g *agentService) profiles() []agentimage.Profile {
	if g.s.sandboxes == nil {
		return agentimage.Profiles()
	}
	return g.s.sandboxes.Options().Agents
}

func (g *agentService) profile(name string) (agentimage.Profile, error) {
	var names []string
	for _, p := range g.profiles() {
		if p.Named(name) { // "claude" is claude-code; the run records p.Name
			return p, nil
		}
		names = append(names, p.Name)
	}
	return agentimage.Profile{}, errs.New(errs.Invalid, "unknown agent profile %q (known: %s)",
		truncateRunes(name, 60), strings.Join(names, ", "))
}

// defaultImage is the image a run of p uses unless told, and what makes it
// present on the hub's host when it is not.
func defaultImage(p agentimage.Profile) (ref, hint string) {
	switch p.Strategy {
	case agentimage.StrategyBuilder:
		return imagebuild.LatestTag(imagebuild.ManagedProject, p.Slug), "agenthub image build " + p.Name
	case agentimage.StrategyImage:
		return p.Image, "docker pull " + p.Image
	}
	return "", "agentctl agent run " + p.Name + " --image REF"
}

// releaseTimeout bounds the newer-release question (releases.Timeout).
const releaseTimeout = releases.Timeout

// newerRelease is the notice that the agent has a newer release than the
// image (whose pinned version is its input.agent label), or "".
func (g *agentService) newerRelease(ctx context.Context, p agentimage.Profile, labels map[string]string) string {
	r := g.s.sandboxes.Options().Releases
	in := labels[agentimage.LabelPrefix+"input.agent"]
	at := strings.LastIndex(in, "@")
	if r == nil || p.Strategy != agentimage.StrategyBuilder || at < 0 {
		return ""
	}
	have := in[at+1:]
	ctx, cancel := context.WithTimeout(ctx, releaseTimeout)
	defer cancel()
	latest, err := r.Latest(ctx, p)
	if err != nil || latest == "" || latest == have || !newerVersion(latest, have) {
		return ""
	}
	return fmt.Sprintf("%s %s is out; this image has %s (the version is pinned: 'agenthub image build %s --agent-version %s' on the hub's host)",
		p.Name, latest, have, p.Name, latest)
}

// newerVersion reports whether dotted version a is after b, comparing
// numeric fields as numbers (1.10 > 1.9); a field that is not a number
// compares as text.
func newerVersion(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(as), len(bs)) {
		var x, y string
		if i < len(as) {
			x = as[i]
		}
		if i < len(bs) {
			y = bs[i]
		}
		xn, xerr := strconv.Atoi(x)
		yn, yerr := strconv.Atoi(y)
		switch {
		case xerr == nil && yerr == nil && xn != yn:
			return xn > yn
		case (xerr != nil || yerr != nil) && x != y:
			return x > y
		}
	}
	return false
}

func (g *agentService) ListAgents(ctx context.Context, _ *hubv1.ListAgentsRequest) (*hubv1.ListAgentsResponse, error) {
	if _, ok := callerFrom(ctx); !ok {
		return nil, errs.New(errs.Unauthenticated, "no caller")
	}
	resp := &hubv1.ListAgentsResponse{}
	for _, p := range g.profiles() {
		ref, hint := defaultImage(p)
		a := &hubv1.Agent{Name: p.Name, DisplayName: p.DisplayName, Executable: p.Executable, Strategy: string(p.Strategy),
			Image: ref, ImageHint: hint, Network: p.Network.Default, Ttl: durationpb.New(p.TTL.Duration),
			Sensitivity: string(p.Sensitivity), RiskNotes: p.RiskNotes}
		if l, err := allowlist.ParseList(p.Network.Allow); err == nil && len(l) > 0 {
			a.Network = l.String()
		}
		if m := g.s.sandboxes; m != nil && ref != "" {
			_, err := m.Options().Driver.Image(ctx, ref)
			a.ImagePresent = err == nil
		} else if m == nil {
			a.ImageHint = "this hub runs no sandboxes"
		}
		resp.Agents = append(resp.Agents, a)
	}
	return resp, nil
}

func (g *agentService) RunAgent(ctx context.Context, req *hubv1.RunAgentRequest) (*hubv1.RunAgentResponse, error) {
	c, org, err := g.a.org(ctx, req.GetOrg())
	if err != nil {
		return nil, err
	}
	if err := needAdmin(c); err != nil {
		return nil, err
	}
	m := g.s.sandboxes
	if m == nil {
		return nil, noSandboxes
	}
	p, err := g.profile(req.GetProfile())
	if err != nil {
		return nil, err
	}
	// An org or token at its cap is refused before any image or secret
	// is fetched; create counts again as it records the sandbox.
	if err := m.Admit(ctx, org, c.token.ID); err != nil {
		return nil, err
	}
	ref, hint := defaultImage(p)
	if img := strings.TrimSpace(req.GetImage()); img != "" {
		if len(img) > 512 {
			return nil, errs.New(errs.Invalid, "image reference longer than 512 characters")
		}
		if err := imageref.CheckReference(img); err != nil {
			return nil, errs.New(errs.Invalid, "--image: %v", err)
		}
		ref, hint = img, "docker pull "+img
	} else if ref == "" {
		return nil, errs.New(errs.Invalid, "%s has no default image: give one with --image REF (agentctl agent run %s --image REF)", p.Name, p.Name)
	}

	ttl := p.TTL.Duration
	if req.GetTtl() != nil {
		ttl = req.GetTtl().AsDuration()
		if ttl < minAgentTTL || ttl > maxAgentTTL {
			return nil, errs.New(errs.Invalid, "ttl %s: want %s to %s", ttl, minAgentTTL, maxAgentTTL)
		}
	}
	var notices []string
	network, allow, err := runNetwork(p, req)
	if err != nil {
		return nil, err
	}

	res := broker.Resolver{NotFound: ErrNoSecret}
	if g.s.opts.Secrets != nil {
		res.Resolve = g.s.opts.Secrets.Resolve
	}
	// A profile's key variable among the secrets is brokered, the others delivered.
	plan, err := broker.New(ctx, res, p, req.GetSecrets(), req.GetSecretHeaders(), network)
	if err != nil {
		return nil, err
	}
	for _, e := range plan.Hosts {
		if !slices.Contains(allow, e) {
			allow = append(allow, e)
		}
	}
	secrets, err := g.s.resolveSecrets(ctx, plan.Values)
	if err != nil {
		return nil, err
	}
	notices = append(notices, broker.EnteringNotice(secrets)...)

	// The image by id: what was checked is what runs, and a missing one is
	// an error that names the fix, never another image.
	o := m.Options()
	img, err := o.Driver.Image(ctx, ref)
	switch {
	case errors.Is(err, sandbox.ErrNotFound):
		if w := sandbox.TermsOf(o.Driver); w != sandbox.DockerTerms {
			return nil, errs.New(errs.Precondition, "the image %s of %s is not on %s: build it with '%s', then %s", ref, p.Name, w.Engine, hint, w.ImageFix)
		}
		return nil, errs.New(errs.Precondition, "the image %s of %s is not on this hub's Docker engine: run '%s' on the hub's host", ref, p.Name, hint)
	case err != nil:
		return nil, sandboxes.EngineError(err, "agent "+p.Name)
	}
	if n := g.newerRelease(ctx, p, img.Labels); n != "" {
		notices = append(notices, n)
	}
	hubLimits := o.Limits
	// The profile's CPUs are a default: never more than the host spares.
	limits := sandbox.Limits{CPUs: min(p.Limits.CPUs, sandboxes.SpareCPUs(o.HostCPUs)), MemoryBytes: p.Limits.MemoryMiB << 20, Pids: p.Limits.Pids,
		TmpBytes: hubLimits.TmpBytes, HomeBytes: hubLimits.HomeBytes, WorkspaceBytes: hubLimits.WorkspaceBytes}
	// HOME (and the XDG directories) in the workspace: what the agent
	// keeps goes with its sandbox, and the HOME tmpfs stays small.
	run := sandboxes.Run{Environment: agentEnvPrefix + p.Name, Image: img.ID, Network: network, Limits: limits, TTL: ttl,
		Home: sandbox.WorkspaceDir + "/.home", Allow: allow, Secrets: len(secrets) > 0 || len(plan.Inject) > 0, Isolation: p.Isolation,
		Inject: plan.Inject, Rules: plan.Rules, Env: plan.Env}
	sb, err := m.StartRun(ctx, org, run)
	if err != nil {
		if errs.KindOf(err) == errs.Unknown && rpcerr.Code(err) == codes.Internal {
			err = errs.New(errs.Unavailable, "agent %s: %v", p.Name, err)
		}
		return nil, err
	}

	// Known before they are there: their values (brokered ones too) are
	// redacted from the sandbox's activity from the start.
	if held := maps.Clone(plan.Held); len(held)+len(secrets) > 0 {
		maps.Copy(held, secrets)
		g.s.activity.Hold(sb.ID, held)
	}
	if len(secrets) > 0 {
		if err := g.s.deliverSecrets(ctx, sb.ID, secrets); err != nil {
			m.Destroy(context.WithoutCancel(ctx), sb, "its secrets could not be delivered")
			return nil, err
		}
	}

	shown := network
	if len(allow) > 0 {
		shown = "allow " + strings.Join(allow.Strings(), " ")
		notices = append(notices, fmt.Sprintf("the sandbox reaches only %s, through the hub's egress proxy (HTTPS_PROXY=http://%s); --network open gives it the public network",
			strings.Join(allow.Strings(), ", "), wire.SandboxEgressProxy))
	}
	// The image by name and by id: what ran is known exactly even after
	// the name moved to a newer build.
	image := ref
	if img.ID != ref {
		image += ", id " + img.ID
	}
	what := fmt.Sprintf("ran agent %s in %s (image %s, network %s, ttl %s)", p.Name, sb.ID, image, shown, ttl)
	if len(secrets) > 0 {
		what += ", secrets " + strings.Join(slices.Sorted(maps.Keys(secrets)), ", ")
	}
	if len(plan.Names) > 0 {
		what += ", brokered " + strings.Join(plan.Names, ", ")
	}
	if network == "public" {
		what += ": the public network, as asked (--network open)"
	}
	g.s.recordHub(ctx, org, &agentdv1.ActivityRecord{Actor: c.token.Name, Kind: wire.KindAgentRun, Summary: what,
		Outcome: agentdv1.Outcome_OUTCOME_OK, ObjectId: sb.ID})
	return &hubv1.RunAgentResponse{SandboxId: sb.ID, Image: img.ID, Network: network, Allow: allow.Strings(),
		Expires: timestamppb.New(sb.ExpiresAt), Notices: notices, Executable: p.Executable}, nil
}

// maxRunAllow bounds the destinations one run may add.
const maxRunAllow = 64

// runNetwork is a run's Docker network ("none" or "public") and, with
// "none", its allow list: the profile's, plus what the run adds.
func runNetwork(p agentimage.Profile, req *hubv1.RunAgentRequest) (string, allowlist.List, error) {
	extra := req.GetAllow()
	if len(extra) > maxRunAllow {
		return "", nil, errs.New(errs.Invalid, "--allow: %d destinations; at most %d", len(extra), maxRunAllow)
	}
	switch req.GetNetwork() {
	case "":
	case "open":
		if len(extra) > 0 {
			return "", nil, errs.New(errs.Invalid, "--allow adds to the restricted network; with --network open the sandbox reaches every public host already: give one or the other")
		}
		return "public", nil, nil
	default:
		return "", nil, errs.New(errs.Invalid, "network %q: want open (the public network, no private ones), or nothing for the profile's restriction", truncateRunes(req.GetNetwork(), 40))
	}
	var allow allowlist.List
	if p.Network.Default == agentimage.NetworkAllow {
		l, err := allowlist.ParseList(p.Network.Allow) // checked when the profile was loaded
		if err != nil {
			return "", nil, errs.New(errs.Unknown, "profile %s: %v", p.Name, err)
		}
		allow = l
	}
	for _, s := range extra {
		e, err := allowlist.Parse(s)
		if err != nil {
			return "", nil, errs.New(errs.Invalid, "--allow: %v", err)
		}
		if !slices.Contains(allow, e) {
			allow = append(allow, e)
		}
	}
	return "none", allow, nil
}
