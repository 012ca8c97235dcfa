package sandboxes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/devdepot-ai/agentd/internal/conformance"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/imagecheck"
	"github.com/devdepot-ai/agentd/internal/wire"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// ValidationConversation prefixes the conversation of the sandbox a
// validation runs its checks in; nothing routes to it.
const ValidationConversation = "hub:validate:"

// Inventory is what an image adds to the base image, as stored (in
// store.Environment.Inventory, as JSON).
type Inventory struct {
	Tools          []string `json:"tools"`
	PythonPackages []string `json:"python_packages"`
}

// StartValidation runs a validation of e (whose generation is current) in
// the background: its outcome is written to the store.
func (m *Manager) StartValidation(org store.Org, e store.Environment) {
	key := org.ID + "/" + e.Name
	m.mu.Lock()
	if cancel, ok := m.jobs[key]; ok {
		cancel() // superseded: its writes are refused by generation anyway
	}
	ctx, cancel := context.WithCancel(m.ctx)
	m.jobs[key] = cancel
	m.mu.Unlock()
	m.goFn(func(context.Context) {
		defer cancel()
		m.validate(ctx, org, e)
		m.mu.Lock()
		delete(m.jobs, key)
		m.mu.Unlock()
	})
}

// validate runs every check on a custom image and records the outcome:
// ready with the digest pinned, or rejected with the report.
func (m *Manager) validate(ctx context.Context, org store.Org, e store.Environment) {
	log := m.log.With(zap.String("org", org.Name), zap.String("environment", e.Name), zap.Int64("generation", e.Generation))
	progress := func(reason string) {
		if err := m.o.Store.SetValidationReason(ctx, org.ID, e.Name, e.Generation, reason, m.o.Now()); err != nil && ctx.Err() == nil {
			log.Info("validation progress not recorded", zap.Error(err))
		}
	}
	ref := e.Image
	if e.Running == "revalidate" && e.Pinned != "" {
		ref = e.Pinned // never the tag
	}
	log.Info("validating", zap.String("image", ref), zap.String("kind", e.Running))
	report, pinned, inv := m.checkImage(ctx, org, e, ref, progress)
	if ctx.Err() != nil {
		return // superseded or shutting down; a restart runs it again
	}
	out := store.Environment{State: store.EnvReady, Pinned: pinned}
	if report.Failed() {
		out = store.Environment{State: store.EnvRejected}
		for _, c := range report {
			if c.Status == sandbox.Fail {
				out.Reason = c.Breaks
				break
			}
		}
		if e.Running == "revalidate" {
			// The digest stays recorded with the rejection (calls are
			// refused all the same): the next revalidate checks it again,
			// never the tag; only update lets go of it.
			out.Pinned = e.Pinned
		}
	}
	out.Report, _ = json.Marshal(report)
	if inv != nil {
		out.Inventory, _ = json.Marshal(inv)
	}
	if _, err := m.o.Store.FinishValidation(context.WithoutCancel(ctx), org.ID, e.Name, e.Generation, out, m.o.Now()); err != nil {
		log.Info("validation outcome not recorded", zap.Error(err))
		return
	}
	if out.State == store.EnvRejected {
		log.Warn("image rejected", zap.String("reason", out.Reason))
	} else {
		log.Info("image ready", zap.String("pinned", pinned))
	}
}

// checkImage runs the checks in order: the registry's (before any pull),
// the pull by digest, then the image run as a sandbox with every operation
// an agent uses, end to end through the hub.
func (m *Manager) checkImage(ctx context.Context, org store.Org, e store.Environment, ref string, progress func(string)) (sandbox.Report, string, *Inventory) {
	progress("checking the image in its registry")
	opts := m.o.ImageCheck
	if base, err := m.o.Driver.Image(ctx, m.o.BaseImage); err == nil {
		opts.BaseBuild = base.Labels[sandbox.LabelBaseBuild]
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	res, err := imagecheck.Run(rctx, ref, opts)
	cancel()
	report := res.Report
	if err != nil {
		return append(report, sandbox.Check{ID: "registry", Status: sandbox.Fail, Title: "read the image from its registry",
			Breaks: "the checks could not finish: " + err.Error(), Fix: "try again: agentctl env revalidate " + e.Name}), "", nil
	}
	if report.Failed() {
		return report, "", nil
	}
	digest := res.Digest

	progress("pulling " + digest)
	if _, err := m.o.Driver.Pull(ctx, digest); err != nil {
		return append(report, sandbox.Check{ID: "pull.engine", Status: sandbox.Fail, Title: "pull the image by digest",
			Breaks: "the sandboxes' container runtime could not pull " + digest + ": " + err.Error(),
			Fix:    "check that the image is public and the registry reachable from where sandboxes run (the hub's host; on Kubernetes, every node), then: agentctl env revalidate " + e.Name}), "", nil
	}
	report = append(report, sandbox.Check{ID: "pull.engine", Status: sandbox.Pass, Title: "pull the image by digest"})

	progress("starting a sandbox of the image")
	env := envSpec{name: e.Name, image: digest, network: e.Network, workspaceMax: e.WorkspaceMax, isolation: e.Isolation}
	sb, err := m.create(ctx, org, env, fmt.Sprintf("%s%d", ValidationConversation, e.Generation), false)
	if err != nil {
		return append(report, sandbox.Check{ID: "sandbox.start", Status: sandbox.Fail,
			Title:  "start as uid 1000 on a read-only root, with agentd connected",
			Breaks: "no sandbox can start from this image: " + err.Error(),
			Fix:    "build FROM " + sandbox.BaseImage + " and keep its user (1000), /workspace and /tmp; do not replace its entrypoint's needs (a static agentd is mounted at " + sandbox.AgentdDir + ")"}), "", nil
	}
	defer m.destroy(context.WithoutCancel(ctx), sb, "validation done")
	report = append(report, sandbox.Check{ID: "sandbox.start", Status: sandbox.Pass, Title: "start as uid 1000 on a read-only root, with agentd connected"})
	cc, ok := m.o.Tunnels.Get(sb.ID)
	if !ok {
		return append(report, sandbox.Check{ID: "sandbox.online", Status: sandbox.Fail, Title: "agentd stays connected",
			Breaks: "agentd disconnected right after it started", Fix: "check the image's limits and entrypoint"}), "", nil
	}
	cctx := metadata.NewOutgoingContext(ctx, metadata.Pairs(wire.MDActor, "agenthub (validation)"))

	progress("running every operation an agent uses")
	for _, r := range conformance.Run(cctx, cc, conformance.Options{Sandbox: true}) {
		c := sandbox.Check{ID: "agent." + r.ID, Title: r.Name, Status: sandbox.Pass}
		if !r.OK {
			c.Status, c.Breaks, c.Fix = sandbox.Fail, r.Breaks, r.Fix
			if r.Detail != "" {
				c.Breaks += " (" + r.Detail + ")"
			}
		}
		report = append(report, c)
	}
	report = append(report, m.rootOnlyTools(cctx, cc))
	if report.Failed() {
		return report, "", nil
	}

	progress("listing what the image adds")
	inv, err := m.imageInventory(cctx, org, cc)
	if err != nil {
		report = append(report, sandbox.Check{ID: "inventory", Status: sandbox.Warn, Title: "list what the image adds",
			Breaks: "the agent is not told which tools the image adds: " + err.Error(), Fix: "agentctl env revalidate " + e.Name})
	}
	return report, digest, inv
}

// rootOnlyToolsScript prints every file on PATH that uid 1000 cannot run.
const rootOnlyToolsScript = `IFS=:; for d in $PATH; do [ -d "$d" ] || continue; for f in "$d"/*; do if [ -f "$f" ] && [ ! -x "$f" ]; then echo "$f"; fi; done; done`

// rootOnlyTools checks that every program on PATH is runnable by uid 1000.
func (m *Manager) rootOnlyTools(ctx context.Context, cc grpc.ClientConnInterface) sandbox.Check {
	c := sandbox.Check{ID: "tools.uid1000", Title: "every program on PATH runs as uid 1000", Status: sandbox.Pass}
	out, code, err := runOutput(ctx, cc, []string{"sh", "-c", rootOnlyToolsScript})
	switch {
	case err != nil:
		c.Status, c.Breaks, c.Fix = sandbox.Fail, "the PATH could not be listed: "+err.Error(), "keep a POSIX sh at /bin/sh"
	case code != 0:
		c.Status, c.Breaks, c.Fix = sandbox.Fail, fmt.Sprintf("listing the PATH failed (exit %d)", code), "keep a POSIX sh at /bin/sh"
	case strings.TrimSpace(out) != "":
		files := strings.Fields(out)
		shown := files
		if len(shown) > 10 {
			shown = append(shown[:10:10], fmt.Sprintf("and %d more", len(files)-10))
		}
		c.Status = sandbox.Fail
		c.Breaks = "the agent runs as uid 1000 and cannot run " + strings.Join(shown, ", ") + ": these only work as root"
		c.Fix = "make them executable by everyone (chmod 0755) in the image, or install them for user 1000"
	}
	return c
}

// runOutput runs argv in the sandbox and returns its stdout and exit code.
func runOutput(ctx context.Context, cc grpc.ClientConnInterface, argv []string) (string, int, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	st, err := agentdv1.NewProcessServiceClient(cc).Start(ctx, &agentdv1.StartRequest{Argv: argv})
	if err != nil {
		return "", 0, err
	}
	var out strings.Builder
	for {
		resp, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out.String(), 0, errors.New("the process stream ended without an exit")
		}
		if err != nil {
			return out.String(), 0, err
		}
		ev := resp.GetEvent()
		if o := ev.GetOutput(); o != nil && o.GetStream() == agentdv1.OutputStream_OUTPUT_STREAM_STDOUT && out.Len() < 1<<20 {
			out.Write(o.GetData())
		}
		if x := ev.GetExited(); x != nil {
			return out.String(), int(x.GetExitCode()), nil
		}
	}
}

// imageInventory lists the tools and Python packages the image has that
// the base image has not.
func (m *Manager) imageInventory(ctx context.Context, org store.Org, cc grpc.ClientConnInterface) (*Inventory, error) {
	base, err := m.baseInventory(ctx, org)
	if err != nil {
		return nil, fmt.Errorf("the base image's inventory: %w", err)
	}
	got, err := agentdv1.NewSystemServiceClient(cc).Inventory(ctx, &agentdv1.InventoryRequest{NoVersions: true})
	if err != nil {
		return nil, err
	}
	inv := &Inventory{Tools: []string{}, PythonPackages: []string{}}
	for _, t := range got.GetTools() {
		if !slices.Contains(base.Tools, t.GetName()) {
			inv.Tools = append(inv.Tools, t.GetName())
		}
	}
	for _, p := range got.GetPythonPackages() {
		if !slices.Contains(base.PythonPackages, p.GetName()) {
			inv.PythonPackages = append(inv.PythonPackages, p.GetName()+"=="+p.GetVersion())
		}
	}
	return inv, nil
}

// baseInventory is the base image's tools and Python packages (names),
// learned once per base image from a sandbox of it.
func (m *Manager) baseInventory(ctx context.Context, org store.Org) (*Inventory, error) {
	env, err := m.resolve(ctx, org, BuiltinEnvironment)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	inv := m.baseInv[env.image]
	m.mu.Unlock()
	if inv != nil {
		return inv, nil
	}
	env.network = "none"
	sb, err := m.create(ctx, org, env, ValidationConversation+"base", false)
	if err != nil {
		return nil, err
	}
	defer m.destroy(context.WithoutCancel(ctx), sb, "base inventory taken")
	cc, ok := m.o.Tunnels.Get(sb.ID)
	if !ok {
		return nil, errors.New("the base sandbox disconnected")
	}
	got, err := agentdv1.NewSystemServiceClient(cc).Inventory(ctx, &agentdv1.InventoryRequest{NoVersions: true})
	if err != nil {
		return nil, err
	}
	inv = &Inventory{}
	for _, t := range got.GetTools() {
		inv.Tools = append(inv.Tools, t.GetName())
	}
	for _, p := range got.GetPythonPackages() {
		inv.PythonPackages = append(inv.PythonPackages, p.GetName())
	}
	m.mu.Lock()
	m.baseInv[env.image] = inv
	m.mu.Unlock()
	return inv, nil
}

// resumeValidations runs again the validations a previous hub process left
// unfinished.
func (m *Manager) resumeValidations(ctx context.Context) {
	es, err := m.o.Store.ListValidating(ctx)
	if err != nil {
		m.log.Warn("listing unfinished validations", zap.Error(err))
		return
	}
	for _, e := range es {
		org, err := m.o.Store.Org(ctx, e.OrgID)
		if err != nil {
			continue
		}
		m.StartValidation(org, e)
	}
}
