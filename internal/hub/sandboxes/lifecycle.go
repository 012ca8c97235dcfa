package sandboxes

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/wire"
)

// resolve finds what an environment runs, or why it cannot run now
// (FAILED_PRECONDITION naming it: never another environment instead).
func (m *Manager) resolve(ctx context.Context, org store.Org, name string) (envSpec, error) {
	if name == BuiltinEnvironment {
		image, err := m.builtinImage(ctx)
		if err != nil {
			return envSpec{}, err
		}
		iso, err := m.o.Store.BuiltinIsolation(ctx, org.ID)
		if err != nil {
			return envSpec{}, unavailable("environment builtin's isolation", err)
		}
		return envSpec{name: name, image: image, network: m.o.BuiltinNetwork, isolation: iso}, nil
	}
	e, err := m.o.Store.Environment(ctx, org.ID, name)
	if errors.Is(err, store.ErrNotFound) {
		return envSpec{}, fail(ErrNotFound, errs.NotFound, "environment %s not found in org %s; list them with 'agentctl env ls'", name, org.Name)
	}
	if err != nil {
		return envSpec{}, unavailable("environment "+name, err)
	}
	if e.State != store.EnvReady || e.Pinned == "" {
		why := e.Reason
		if why == "" {
			why = "no validated image yet"
		}
		return envSpec{}, fail(ErrNotReady, errs.Precondition, "environment %s is %s: %s", name, e.State, why)
	}
	return envSpec{name: name, image: e.Pinned, network: e.Network, workspaceMax: e.WorkspaceMax, isolation: e.Isolation}, nil
}

// builtinImage is the base image's id, asked of the engine at most every
// 30 s: not a Docker round trip on every call, and a connected sandbox
// keeps working while the engine is away.
func (m *Manager) builtinImage(ctx context.Context) (string, error) {
	m.mu.Lock()
	id, at := m.baseID, m.baseAt
	m.mu.Unlock()
	if id != "" && time.Since(at) < 30*time.Second {
		return id, nil
	}
	img, err := m.o.Driver.Image(ctx, m.o.BaseImage)
	if err != nil && id != "" && !errors.Is(err, sandbox.ErrNotFound) {
		return id, nil
	}
	if err == nil {
		m.mu.Lock()
		m.baseID, m.baseAt = img.ID, time.Now()
		m.mu.Unlock()
	}
	switch {
	case errors.Is(err, sandbox.ErrNotFound):
		w := sandbox.TermsOf(m.o.Driver)
		return "", fail(ErrNotReady, errs.Precondition,
			"environment builtin is unavailable: the sandbox base image %s is not on %s; %s ('make sandbox-base' builds it)", m.o.BaseImage, w.Engine, w.ImageFix)
	case err != nil:
		return "", EngineError(err, "environment builtin")
	}
	return img.ID, nil
}

// network returns the Docker network for an environment's network choice.
func (m *Manager) network(env envSpec) (string, error) {
	if env.network == "none" {
		return "none", nil
	}
	if m.o.PublicNetwork == "" {
		return "", fail(ErrNotReady, errs.Precondition,
			"environment %s needs the public network, which this hub has not set up (its egress rules could not be installed; see the hub's log), and it never runs elsewhere", env.name)
	}
	if err := m.egressRefusal(); err != nil {
		return "", err
	}
	return m.o.PublicNetwork, nil
}

// Get returns the conversation's sandbox in the environment, creating it
// (from the warm pool when it can) if there is none, once it is online.
// The call that asked records its use (Enter). An environment that cannot
// take the call fails it (ErrNotReady, ErrNotFound, …): the call never
// runs anywhere else.
func (m *Manager) Get(ctx context.Context, org store.Org, envName, conv string) (string, error) {
	env, err := m.resolve(ctx, org, envName)
	if err != nil {
		m.refuse(org, envName, err)
		return "", err
	}
	key := org.ID + "/" + envName + "/" + conv
	for round := 0; ; round++ {
		if round == 10 {
			return "", errs.New(errs.Unavailable, "environment %s: the conversation's sandbox keeps changing (other hub replicas make and remove it); retry", envName)
		}
		// Most calls: the conversation's sandbox is there and online (on
		// this replica, or on another one, which the call is forwarded to).
		if sb, err := m.o.Store.ConversationSandbox(ctx, org.ID, envName, conv); err == nil && (m.current(sb, env) || !m.movable(sb)) &&
			stateOf(sb) != store.SandboxArchived && (stateOf(sb) == store.SandboxRunning || sb.Hub != m.o.HubID) {
			if _, ok := m.o.Tunnels.Get(sb.ID); ok && stateOf(sb) == store.SandboxRunning {
				return sb.ID, nil
			}
			if sb.Hub != m.o.HubID {
				id, err := m.remote(ctx, sb)
				if errors.Is(err, errLookAgain) {
					continue
				}
				if err != nil {
					m.refuse(org, envName, err)
				}
				return id, err
			}
		}
		// Otherwise one caller per conversation brings it up; the others
		// wait for it and look again.
		m.mu.Lock()
		op, busy := m.starting[key]
		if !busy {
			op = &startOp{done: make(chan struct{})}
			m.starting[key] = op
		}
		m.mu.Unlock()
		if busy {
			select {
			case <-op.done:
			case <-ctx.Done():
				return "", ctx.Err()
			}
			if op.err != nil && !errors.Is(op.err, errLookAgain) {
				return "", op.err
			}
			continue
		}
		op.id, op.err = m.bringUp(ctx, org, env, conv)
		m.mu.Lock()
		delete(m.starting, key)
		m.mu.Unlock()
		close(op.done)
		if errors.Is(op.err, errLookAgain) {
			continue
		}
		if op.err != nil {
			m.refuse(org, envName, op.err)
		}
		return op.id, op.err
	}
}

// bringUp gives the conversation a sandbox that is online: its own once it
// reconnects or is started again, else a new one (a warm one if it can).
// errLookAgain: another replica's sandbox is the conversation's now.
func (m *Manager) bringUp(ctx context.Context, org store.Org, env envSpec, conv string) (string, error) {
	if sb, err := m.o.Store.ConversationSandbox(ctx, org.ID, env.name, conv); err == nil {
		switch {
		case stateOf(sb) == store.SandboxArchived:
			// Its workspace is on no engine: this replica restores it,
			// from the environment's current image.
			began := m.o.Now()
			from, err := m.restore(ctx, org, env, sb)
			if err != nil {
				return "", err
			}
			if from == "" {
				return "", errLookAgain // restored or removed meanwhile
			}
			leaveNote(ctx, resumeNote(from, m.o.Now().Sub(began)))
			return sb.ID, nil
		case !m.current(sb, env) && m.movable(sb):
			// The environment was updated: the conversation moves to the
			// new pin, its /workspace with it.
			note, err := m.moveToNewImage(ctx, org, env, sb)
			if err != nil {
				return "", err
			}
			leaveNote(ctx, note)
			return sb.ID, nil
		case sb.Hub != m.o.HubID:
			return "", errLookAgain
		case stateOf(sb) != store.SandboxRunning:
			// Paused or stopped by the idle policy or a person: the
			// conversation's call brings it back, /workspace and all.
			began := m.o.Now()
			from, err := m.wake(ctx, sb)
			if err == nil {
				leaveNote(ctx, resumeNote(from, m.o.Now().Sub(began)))
				return sb.ID, nil
			}
			if !errors.Is(err, sandbox.ErrNotFound) {
				return "", err // its workspace is still there: never replaced by a fresh one
			}
			// Its container was removed outside the hub (docker
			// container prune). A workspace still on its volume is
			// never dropped for a fresh sandbox: a person decides.
			vols, verr := m.o.Driver.Volumes(ctx, map[string]string{sandbox.LabelID: sb.ID})
			if verr != nil {
				return "", verr
			}
			if len(vols) > 0 {
				m.setState(ctx, sb.ID, store.SandboxStopped, containerGoneReason)
				w := sandbox.TermsOf(m.o.Driver)
				return "", errs.New(errs.Precondition, "sandbox %s of conversation %q was %s and its %s was removed outside the hub (%s?); its /workspace is kept on %s %s: copy what you need from it, then 'agentctl sandbox rm %s' starts the conversation afresh",
					sb.ID, sb.Conversation, stateOf(sb), w.Container, w.Removal, w.Volume, vols[0].Name, sb.ID)
			}
			m.log.Warn("sandbox's container and workspace gone; starting a new one", zap.String("sandbox", sb.ID))
			m.destroy(context.WithoutCancel(ctx), sb, "its container and workspace are gone")
		case m.awaitOnline(ctx, sb) == nil:
			return sb.ID, nil
		default:
			err := m.restart(ctx, sb)
			if err == nil {
				return sb.ID, nil
			}
			m.log.Warn("sandbox lost; starting a new one", zap.String("sandbox", sb.ID), zap.Error(err))
			m.destroy(context.WithoutCancel(ctx), sb, "lost: "+err.Error())
		}
	}
	return m.start(ctx, org, env, conv)
}

// restart starts a conversation's sandbox again whose container stopped
// (killed, out of memory, the host restarted): same container, same
// /workspace volume, a fresh /tmp and HOME; agentd dials in again with the
// same credential. A second stop within one call is not retried.
func (m *Manager) restart(ctx context.Context, sb store.Sandbox) error {
	if sb.ContainerID == "" {
		return errors.New("no container")
	}
	info, err := m.o.Driver.Inspect(ctx, sb.ContainerID)
	if err != nil {
		return err
	}
	if info.State == sandbox.StateRunning {
		return errors.New("its container runs but agentd does not connect")
	}
	m.log.Info("sandbox stopped; starting it again", zap.String("sandbox", sb.ID), zap.String("why", exitReason(info)))
	if err := m.offerKey(sb.ID); err != nil {
		return err
	}
	if err := m.o.Driver.Start(ctx, sb.ContainerID); err != nil {
		return err
	}
	return m.awaitOnline(ctx, sb)
}

// refuse logs a call that an environment could not take, at error level.
func (m *Manager) refuse(org store.Org, env string, err error) {
	if errs.KindOf(err) == errs.NotFound {
		return
	}
	m.log.Error("environment refused a call", zap.String("org", org.Name), zap.String("environment", env), zap.Error(err))
}

// start gives the conversation a warm sandbox, or makes one.
func (m *Manager) start(ctx context.Context, org store.Org, env envSpec, conv string) (string, error) {
	defer m.fill(org, env)
	token := m.o.CallerToken(ctx)
	m.quota.Lock()
	if err := m.admit(ctx, org, token); err != nil {
		m.quota.Unlock()
		return "", err
	}
	sb, err := m.o.Store.ClaimWarmSandbox(ctx, org.ID, env.name, m.o.HubID, conv, m.o.Now())
	if err == nil && token != "" {
		err = m.o.Store.SetSandboxToken(ctx, sb.ID, token)
	}
	m.quota.Unlock()
	if err == nil {
		if sb.Image == env.image && m.awaitOnline(ctx, sb) == nil {
			return sb.ID, nil
		}
		m.destroy(context.WithoutCancel(ctx), sb, "a stale warm sandbox")
	}
	sb, err = m.create(ctx, org, env, conv, false)
	if errors.Is(err, store.ErrConflict) {
		// Another replica made it meanwhile: get waits for it there.
		return "", errLookAgain
	}
	if err != nil {
		return "", err
	}
	return sb.ID, nil
}

// create makes a sandbox: its machine identity (a key for it alone), its
// row, its container; and waits until its agentd is connected.
func (m *Manager) create(ctx context.Context, org store.Org, env envSpec, conv string, warm bool) (store.Sandbox, error) {
	if err := m.withEnvironmentAllow(ctx, org.ID, &env); err != nil {
		return store.Sandbox{}, err
	}
	sb, err := m.build(ctx, org, env, conv, warm)
	if err != nil {
		return store.Sandbox{}, err
	}
	return sb, m.launch(ctx, org, env, sb)
}

// build makes a sandbox's machine identity, row and container, not
// started (its reaper hold is the caller's to take: a fork's last until it
// is launched); what it made is removed when it fails.
func (m *Manager) build(ctx context.Context, org store.Org, env envSpec, conv string, warm bool) (store.Sandbox, error) {
	network, err := m.network(env)
	if err != nil {
		return store.Sandbox{}, err
	}
	runtime := sandbox.RuntimeFor(env.isolation, network)
	runtimeArgs, err := m.runtimeArgs(ctx, env.isolation, runtime)
	if err != nil {
		return store.Sandbox{}, err
	}
	id := store.NewID("sb-")
	defer m.hold(id)() // the reaper leaves a sandbox being made alone, however long it takes
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return store.Sandbox{}, errs.New(errs.Unknown, "sandbox key: %v", err)
	}
	now := m.o.Now()
	sbRow := store.Sandbox{ID: id, OrgID: org.ID, Environment: env.name, Conversation: conv, Warm: warm,
		Image: env.image, Hub: m.o.HubID, CreatedAt: now, ExpiresAt: expiry(now, env.ttl),
		HoldsSecrets: env.secrets}
	if !warm {
		sbRow.Token = m.o.CallerToken(ctx)
	}
	sb, err := m.record(ctx, org, sbRow, pub)
	if err != nil {
		return store.Sandbox{}, err
	}
	spec := m.spec(org, env, id, conv, network, runtime, runtimeArgs)
	failed := func(err error) (store.Sandbox, error) {
		m.destroy(context.WithoutCancel(ctx), sb, "failed to start")
		return store.Sandbox{}, err
	}
	if err := m.storeEgress(ctx, id, env.allow); err != nil {
		return failed(err)
	}
	if err := m.saveKey(id, key.Seed()); err != nil {
		return failed(unavailable("sandbox key", err))
	}
	if err := m.grantBroker(ctx, &spec, org.ID, id, env); err != nil {
		return failed(err)
	}
	cid, err := m.createContainer(ctx, spec)
	if err != nil {
		return failed(EngineError(err, fmt.Sprintf("environment %s failed to start a sandbox", env.name)))
	}
	sb.ContainerID = cid
	if err := m.o.Store.SetSandboxContainer(ctx, id, cid); err != nil {
		return failed(unavailable("record sandbox container", err))
	}
	return sb, nil
}

// spec is the container spec of sandbox id of the org's conversation conv
// in env, on network with runtime.
func (m *Manager) spec(org store.Org, env envSpec, id, conv, network, runtime string, runtimeArgs []string) sandbox.Spec {
	spec := sandbox.Spec{
		Name:  "agentd-" + id,
		Image: env.image,
		Labels: map[string]string{
			sandbox.LabelManaged: "1", sandbox.LabelHub: m.o.HubID, sandbox.LabelID: id,
			sandbox.LabelOrg: org.ID, sandbox.LabelEnv: env.name, sandbox.LabelNetwork: network,
		},
		Env: []string{
			wire.EnvSandboxHub + "=unix://" + sandbox.HubSocketDir + "/" + SandboxSocketName,
			wire.EnvSandboxID + "=" + id,
			wire.EnvSandboxOrg + "=" + org.Name,
			wire.EnvSandboxKeyFile + "=" + sandbox.KeyDir + "/" + sandboxKeyFile,
			wire.EnvSandboxEnv + "=" + env.name,
			wire.EnvSandboxImage + "=" + env.image,
		},
		Cmd:              []string{sandbox.AgentdDir + "/agentd", "run", "--mode", "sandbox"},
		AgentdHostDir:    m.o.AgentdDir,
		HubSocketHostDir: m.o.SocketDir,
		KeyHostDir:       m.keyMount(id),
		Network:          network,
		Runtime:          runtime,
		Limits:           m.o.Limits,
	}
	if m.o.TunnelDial {
		// No socket mount: the TCP listener, its CA beside the key.
		spec.Env = append(m.tunnelEnv(), spec.Env[1:]...)
		spec.HubSocketHostDir = ""
	}
	if p := sandbox.Platform(runtimeArgs); p != "" {
		spec.Env = append(spec.Env, wire.EnvSandboxPlatform+"="+p)
	}
	if env.limits != nil {
		spec.Limits = *env.limits
	}
	if env.workspaceMax > 0 {
		spec.Limits.WorkspaceBytes = env.workspaceMax
	}
	spec.Home = env.home
	m.grantEgress(&spec, egressGrant{org: org.ID, env: env.name, conv: conv, allow: env.allow}, id)
	return spec
}

// launch starts a sandbox build made and waits until its agentd is
// connected; it removes the sandbox when it fails.
func (m *Manager) launch(ctx context.Context, org store.Org, env envSpec, sb store.Sandbox) error {
	defer m.hold(sb.ID)()
	failed := func(err error) error {
		m.destroy(context.WithoutCancel(ctx), sb, "failed to start")
		return err
	}
	if err := m.o.Driver.Start(ctx, sb.ContainerID); err != nil {
		return failed(EngineError(err, fmt.Sprintf("environment %s failed to start a sandbox", env.name)))
	}
	m.syncPrivate(ctx) // its environment's private destinations, from its first packet on
	if err := m.awaitOnline(ctx, sb); err != nil {
		return failed(err)
	}
	m.touch(sb.ID) // idle from now on, however long the start took
	m.log.Info("sandbox started", zap.String("sandbox", sb.ID), zap.String("org", org.Name), zap.String("environment", env.name),
		zap.String("conversation", sb.Conversation), zap.Bool("warm", sb.Warm), zap.Duration("took", m.o.Now().Sub(sb.CreatedAt)))
	return nil
}

// expiry is the end of a sandbox made at now that lives ttl (zero: none).
func expiry(now time.Time, ttl time.Duration) time.Time {
	if ttl <= 0 {
		return time.Time{}
	}
	return now.Add(ttl)
}

// awaitOnline waits for the sandbox's agentd to connect, watching its
// container: one that exits first is reported with why.
func (m *Manager) awaitOnline(ctx context.Context, sb store.Sandbox) error {
	ctx, cancel := context.WithTimeout(ctx, m.o.StartTimeout)
	defer cancel()
	up := make(chan error, 1)
	go func() {
		_, err := m.o.Tunnels.Wait(ctx, sb.ID)
		up <- err
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-up:
			if err == nil {
				return nil
			}
			return fail(ErrNotReady, errs.Precondition, "environment %s: sandbox %s did not connect within %s: agentd in the image never reached the hub",
				sb.Environment, sb.ID, m.o.StartTimeout)
		case <-tick.C:
		}
		if sb.ContainerID == "" {
			continue
		}
		info, err := m.o.Driver.Inspect(ctx, sb.ContainerID)
		switch {
		case errors.Is(err, sandbox.ErrNotFound):
			return fail(ErrNotReady, errs.Precondition, "environment %s: sandbox %s's container is gone", sb.Environment, sb.ID)
		case err != nil && ctx.Err() == nil:
			return EngineError(err, "environment "+sb.Environment)
		case err == nil && info.State != sandbox.StateRunning && info.State != sandbox.StateCreated:
			return fail(ErrNotReady, errs.Precondition, "environment %s: sandbox %s stopped before agentd connected: %s",
				sb.Environment, sb.ID, exitReason(info))
		}
	}
}

// exitReason says why a container stopped, in words.
func exitReason(info sandbox.Info) string {
	var parts []string
	switch {
	case info.OOMKilled:
		parts = append(parts, "was killed for using more memory than its limit")
	case info.ExitCode == 126 || info.ExitCode == 127:
		parts = append(parts, fmt.Sprintf("exited with code %d: agentd could not be run in the image", info.ExitCode))
	case info.ExitCode == 137:
		parts = append(parts, "was killed (SIGKILL, exit code 137)")
	default:
		parts = append(parts, fmt.Sprintf("exited with code %d", info.ExitCode))
	}
	if info.Error != "" {
		parts = append(parts, info.Error)
	}
	return strings.Join(parts, "; ")
}

// destroy removes a sandbox: its tunnel, container and workspace, machine
// identity and row.
func (m *Manager) destroy(ctx context.Context, sb store.Sandbox, why string) {
	if sb.ArchiveID != "" {
		// The row goes first (below): a manifest no row names is only
		// space, a row whose manifest is gone would be a lost workspace.
		defer m.deleteArchive(ctx, sb.OrgID, sb.ArchiveID)
	}
	if sb.Hub != m.o.HubID {
		m.destroyRemote(ctx, sb, why)
		return
	}
	now := m.o.Now()
	if err := m.o.Store.RevokeMachine(ctx, sb.OrgID, sb.ID, now); err != nil && !errors.Is(err, store.ErrNotFound) {
		m.log.Warn("revoking a sandbox's identity", zap.String("sandbox", sb.ID), zap.Error(err))
	}
	// Its processes end with it (ended.go): a paused one's were listed
	// at its pause, a stopped or archived one has none.
	live := stateOf(sb) == store.SandboxRunning || stateOf(sb) == store.SandboxPaused
	if stateOf(sb) == store.SandboxRunning && !sb.Warm {
		m.listProcesses(ctx, sb, true)
	}
	m.o.Tunnels.CloseTunnel(sb.ID)
	// By name, not by sb.ContainerID: when the container is gone already
	// (a removal whose answer was lost), the name still finds its
	// workspace volume.
	if err := m.o.Driver.Remove(ctx, "agentd-"+sb.ID); err != nil {
		m.log.Warn("removing a sandbox's container", zap.String("sandbox", sb.ID), zap.Error(err))
		m.setFound(false) // the next reconcile removes it, the row gone
	}
	if live && !sb.Warm {
		m.endProcesses(ctx, sb, deleteReason(why))
	}
	if err := m.o.Store.DeleteSandbox(ctx, sb.ID); err != nil {
		m.log.Warn("deleting a sandbox", zap.String("sandbox", sb.ID), zap.Error(err))
	}
	m.removeKey(sb.ID)
	m.mu.Lock()
	delete(m.trans, sb.ID)
	delete(m.stops, sb.ID)
	delete(m.used, sb.ID)
	delete(m.stored, sb.ID)
	delete(m.egress, sb.ID)
	m.mu.Unlock()
	m.o.Gone(sb.ID)
	m.syncPrivate(ctx) // its address may be the next sandbox's: its accepts go now
	m.log.Info("sandbox removed", zap.String("sandbox", sb.ID), zap.String("environment", sb.Environment), zap.String("why", why))
}
