package sandboxes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// The states of a conversation's sandbox, and the one place that moves it
// between them (transition). A sandbox is running, paused (its processes
// frozen by the cgroup freezer: memory kept, no CPU) or stopped (its
// container stopped: memory gone, /workspace kept). The idle policy
// (reaper.go) moves it forward; a call for it (Get, Wake) or a person
// (Transition) brings it back. Each step is ranked, so that the policy
// only ever moves a sandbox further from running; a new state (archived)
// is one more rank and one more case in transition.

// rank orders the states by how far they are from running.
func rank(state string) int {
	switch state {
	case store.SandboxPaused:
		return 1
	case store.SandboxStopped:
		return 2
	case store.SandboxArchived:
		return 3
	}
	return 0
}

// stateOf is a row's state ("" in rows made before states: running).
func stateOf(sb store.Sandbox) string {
	if sb.State == "" {
		return store.SandboxRunning
	}
	return sb.State
}

// Actions a person asks of a sandbox (agentctl sandbox ACTION ID…).
const (
	ActionPause  = "pause"
	ActionResume = "resume"
	ActionStop   = "stop"
	ActionStart  = "start"
)

// Result is what a Transition did to one sandbox.
type Result struct {
	ID       string
	From, To string
	// Took is how long it took (a resume: until its agentd was back).
	Took time.Duration
}

// Transition applies a person's action to one of the org's sandboxes:
// pause (running → paused), resume, start or restore (paused, stopped or
// archived → running, once its agentd is back), stop (running or paused →
// stopped), archive (running, paused or stopped → archived: stopped first).
// Asking for the state it is in changes nothing; pausing a stopped or
// archived sandbox is FAILED_PRECONDITION (it has no processes to freeze),
// and so is stopping an archived one.
func (m *Manager) Transition(ctx context.Context, org store.Org, id, action string) (Result, error) {
	sb, err := m.o.Store.Sandbox(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && sb.OrgID != org.ID) {
		return Result{}, fail(ErrNotFound, errs.NotFound, "sandbox %s not found in org %s; list them with 'agentctl sandbox ls'", id, org.Name)
	}
	if err != nil {
		return Result{}, unavailable("sandbox "+id, err)
	}
	if sb.Warm {
		return Result{}, errs.New(errs.Precondition, "sandbox %s is in the warm pool (no conversation yet): it is the hub's to keep", id)
	}
	began := m.o.Now()
	res := Result{ID: id, From: stateOf(sb)}
	var to, why string
	switch action {
	case ActionPause:
		to, why = store.SandboxPaused, "paused"+m.byWhom(ctx)
		if res.From == store.SandboxStopped || res.From == store.SandboxArchived {
			return Result{}, errs.New(errs.Precondition, "sandbox %s is %s: it has no processes to pause (start it with 'agentctl sandbox start %s')", id, res.From, id)
		}
	case ActionStop:
		to, why = store.SandboxStopped, "stopped"+m.byWhom(ctx)
		if res.From == store.SandboxArchived {
			return Result{}, errs.New(errs.Precondition, "sandbox %s is archived: it has no container to stop (restore it with 'agentctl sandbox restore %s')", id, id)
		}
	case ActionArchive:
		to, why = store.SandboxArchived, "archived"+m.byWhom(ctx)
		if m.o.Archive == nil {
			return Result{}, errArchiveOff(id)
		}
	case ActionResume, ActionStart, ActionRestore:
		to = store.SandboxRunning
	default:
		return Result{}, errs.New(errs.Invalid, "sandbox action %q: want pause, resume, stop, start, archive or restore", action)
	}
	res.To = to
	if to == store.SandboxRunning && res.From == store.SandboxArchived {
		// Any replica restores it: its workspace is on no engine.
		env, err := m.resolve(ctx, org, sb.Environment)
		if err != nil {
			return Result{}, err
		}
		if _, err := m.restore(ctx, org, env, sb); err != nil {
			return Result{}, err
		}
		res.Took = m.o.Now().Sub(began)
		return res, nil
	}
	if to == store.SandboxRunning {
		if sb.Hub != m.o.HubID {
			if _, err := m.remote(ctx, sb); err != nil {
				return Result{}, err
			}
		} else if _, err := m.wake(ctx, sb); errors.Is(err, errLookAgain) {
			return m.Transition(ctx, org, id, action) // archived meanwhile: restored now
		} else if err != nil {
			return Result{}, err
		}
		m.touch(id) // a person brought it back: idle from now on
		res.Took = m.o.Now().Sub(began)
		return res, nil
	}
	if sb.Hub != m.o.HubID {
		return Result{}, errs.New(errs.Unavailable, "sandbox %s is driven by another hub replica (%s): ask that replica to %s it", id, sb.Hub, action)
	}
	if to == store.SandboxArchived {
		if res.From == store.SandboxArchived {
			return res, nil
		}
		if err := m.transition(ctx, sb, store.SandboxStopped, "stopped to be archived"+m.byWhom(ctx), time.Time{}); err != nil {
			return Result{}, err
		}
		if err := m.archiveStopped(ctx, sb, why, time.Time{}); err != nil {
			return Result{}, err
		}
		res.Took = m.o.Now().Sub(began)
		return res, nil
	}
	if err := m.transition(ctx, sb, to, why, time.Time{}); err != nil {
		return Result{}, err
	}
	if now, err := m.o.Store.Sandbox(ctx, id); err == nil && to == store.SandboxPaused {
		res.To = stateOf(now) // stopped, where the engine cannot pause
	}
	res.Took = m.o.Now().Sub(began)
	return res, nil
}

// sbLock serialises the transitions of one sandbox.
func (m *Manager) sbLock(id string) func() {
	m.mu.Lock()
	l, ok := m.trans[id]
	if !ok {
		l = &sync.Mutex{}
		m.trans[id] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// transition moves this replica's sandbox forward, to paused or stopped,
// and records it; why says what asked ("idle 5m", "by request"). A
// sandbox at or past to is left as it is. idleSince, when set, is the last
// use the idle policy decided on: a sandbox used since (a call woke it
// while the decision waited for the lock), or busy now, is left alone.
func (m *Manager) transition(ctx context.Context, sb store.Sandbox, to, why string, idleSince time.Time) error {
	defer m.sbLock(sb.ID)()
	if now, err := m.o.Store.Sandbox(ctx, sb.ID); err == nil {
		sb = now // another transition may have run meanwhile
	}
	if rank(stateOf(sb)) >= rank(to) {
		return nil
	}
	if !idleSince.IsZero() {
		m.mu.Lock()
		used, busy := m.used[sb.ID], m.active[sb.ID] > 0
		m.mu.Unlock()
		if busy || used.After(idleSince) || sb.LastUsedAt.After(idleSince) {
			return nil
		}
	}
	if sb.ContainerID == "" {
		return errs.New(errs.Precondition, "sandbox %s has no container yet", sb.ID)
	}
	if stateOf(sb) == store.SandboxRunning {
		m.measure(ctx, sb)
	}
	listed := false
	if to == store.SandboxPaused {
		m.listProcesses(ctx, sb, true) // a stop of the paused sandbox ends them (ended.go)
		listed = true
		err := m.o.Driver.Pause(ctx, sb.ContainerID)
		switch {
		case errors.Is(err, sandbox.ErrNotSupported):
			// No freezer (Kubernetes): stopped instead, the workspace kept.
			to, why = store.SandboxStopped, why+"; stopped: the engine cannot pause"
		case err != nil:
			return EngineError(err, "pause sandbox "+sb.ID)
		}
	}
	switch to {
	case store.SandboxPaused:
		if err := m.o.Store.SetSandboxState(ctx, sb.ID, to, m.o.Now(), why); err != nil {
			return unavailable("record the state of sandbox "+sb.ID, err)
		}
	case store.SandboxStopped:
		if stateOf(sb) == store.SandboxRunning && !listed {
			m.listProcesses(ctx, sb, true) // a paused one's: listed at its pause
		}
		// Recorded first: a call the stop cuts reads why in the row (and a
		// hub that dies before the engine answers finds the container
		// running, and the row running again, at its start).
		if err := m.o.Store.SetSandboxState(ctx, sb.ID, to, m.o.Now(), why); err != nil {
			return unavailable("record the state of sandbox "+sb.ID, err)
		}
		m.mu.Lock()
		m.stops[sb.ID] = stopMark{at: m.o.Now(), why: why}
		m.mu.Unlock()
		// Its processes get SIGTERM, then SIGKILL; a paused one too.
		if err := m.o.Driver.Stop(ctx, sb.ContainerID, stopGrace); err != nil {
			m.setState(context.WithoutCancel(ctx), sb.ID, stateOf(sb), sb.StateReason)
			return EngineError(err, "stop sandbox "+sb.ID)
		}
		m.o.Tunnels.CloseTunnel(sb.ID)
		m.endProcesses(ctx, sb, stopReason(why))
	default:
		return fmt.Errorf("sandbox %s: no transition to %s", sb.ID, to)
	}
	m.log.Info("sandbox "+to, zap.String("sandbox", sb.ID), zap.String("environment", sb.Environment), zap.String("why", why))
	return nil
}

// stopMark is when and why this replica last stopped a sandbox.
type stopMark struct {
	at  time.Time
	why string
}

// StopNote says why the sandbox's processes ended under a call that began
// at since, when this replica stopped it since ("sandbox stopped: idle
// 30m"), for the call's record; "" otherwise. A map lookup: it runs at the
// end of every call to a sandbox.
func (m *Manager) StopNote(id string, since time.Time) string {
	m.mu.Lock()
	s, ok := m.stops[id]
	m.mu.Unlock()
	if !ok || s.at.Before(since) {
		return ""
	}
	return stopReason(s.why)
}

// Now is the manager's clock.
func (m *Manager) Now() time.Time { return m.o.Now() }

// stopGrace is how long a stopped sandbox's processes have between SIGTERM
// and SIGKILL.
const stopGrace = 5 * time.Second

// wake brings this replica's paused or stopped sandbox back to running,
// whatever its container's state (a hub that died mid-transition leaves
// the row and the container apart), and waits for its agentd. A stopped
// sandbox counts against the caps again, so it must pass them. It returns
// the state it woke from ("" when it was running).
func (m *Manager) wake(ctx context.Context, sb store.Sandbox) (string, error) {
	defer m.sbLock(sb.ID)()
	if now, err := m.o.Store.Sandbox(ctx, sb.ID); err == nil {
		sb = now
	}
	from := stateOf(sb)
	if from == store.SandboxArchived {
		// Archived while the caller waited for the lock: the caller
		// looks again, and restores it.
		return "", errLookAgain
	}
	if sb.ContainerID == "" {
		return "", errs.New(errs.Precondition, "sandbox %s has no container yet", sb.ID)
	}
	var info sandbox.Info
	if from == store.SandboxPaused && m.o.Driver.Unpause(ctx, sb.ContainerID) == nil {
		// The common case, without asking the engine first: a paused
		// sandbox's call waits for one engine round trip.
		info.State = sandbox.StateRunning
	} else {
		var err error
		if info, err = m.o.Driver.Inspect(ctx, sb.ContainerID); err != nil {
			return "", err // ErrNotFound: the caller starts afresh
		}
	}
	if from == store.SandboxRunning && info.State == sandbox.StateRunning {
		return "", nil
	}
	if from == store.SandboxStopped {
		org, err := m.o.Store.Org(ctx, sb.OrgID)
		if err != nil {
			return "", unavailable("org of sandbox "+sb.ID, err)
		}
		m.quota.Lock()
		err = m.admit(ctx, org, sb.Token)
		if err == nil {
			err = m.o.Store.SetSandboxState(ctx, sb.ID, store.SandboxRunning, m.o.Now(), "")
		}
		m.quota.Unlock()
		if err != nil {
			return "", err
		}
	}
	switch info.State {
	case sandbox.StatePaused:
		if err := m.o.Driver.Unpause(ctx, sb.ContainerID); err != nil {
			return "", EngineError(err, "resume sandbox "+sb.ID)
		}
	case sandbox.StateRunning:
	default:
		m.log.Info("starting a stopped sandbox", zap.String("sandbox", sb.ID))
		if err := m.offerKey(sb.ID); err != nil {
			return "", unavailable("sandbox key", err)
		}
		if err := m.o.Driver.Start(ctx, sb.ContainerID); err != nil {
			m.setState(context.WithoutCancel(ctx), sb.ID, from, sb.StateReason)
			return "", EngineError(err, "start sandbox "+sb.ID)
		}
		m.syncPrivate(ctx) // a restarted container may have a new address
	}
	if from != store.SandboxStopped {
		m.setState(ctx, sb.ID, store.SandboxRunning, "")
	}
	if err := m.awaitOnline(ctx, sb); err != nil {
		return "", err
	}
	m.touch(sb.ID) // in use again: a policy step decided before is void
	return from, nil
}

// setState records a state, logging a failure (the row and the container
// then disagree until the next transition or reconcile mends it).
func (m *Manager) setState(ctx context.Context, id, state, why string) {
	if err := m.o.Store.SetSandboxState(ctx, id, state, m.o.Now(), why); err != nil {
		m.log.Warn("recording a sandbox's state", zap.String("sandbox", id), zap.String("state", state), zap.Error(err))
	}
}

// Wake brings the org's sandbox id back to running when a call names it
// (agentctl --machine sb-…) while it is paused or stopped; a running one
// (and any id that is not a sandbox of this hub) costs one store read.
// The returned note says what it did ("resumed from stopped in 240 ms"),
// "" when nothing.
func (m *Manager) Wake(ctx context.Context, org store.Org, id string) (string, error) {
	sb, err := m.o.Store.Sandbox(ctx, id)
	if err != nil || sb.OrgID != org.ID || stateOf(sb) == store.SandboxRunning || sb.Warm {
		return "", nil // routing says what is wrong with it
	}
	began := m.o.Now()
	if stateOf(sb) == store.SandboxArchived {
		env, err := m.resolve(ctx, org, sb.Environment)
		if err != nil {
			return "", err
		}
		from, err := m.restore(ctx, org, env, sb)
		if err != nil {
			return "", err
		}
		return resumeNote(from, m.o.Now().Sub(began)), nil
	}
	if sb.Hub != m.o.HubID {
		_, err := m.remote(ctx, sb)
		return "", err
	}
	from, err := m.wake(ctx, sb)
	if errors.Is(err, errLookAgain) {
		return m.Wake(ctx, org, id) // archived meanwhile: restored now
	}
	if err != nil {
		return "", err
	}
	return resumeNote(from, m.o.Now().Sub(began)), nil
}

// resumeNote is what a call's record says of the wake before it.
func resumeNote(from string, took time.Duration) string {
	if from == "" || from == store.SandboxRunning {
		return ""
	}
	return fmt.Sprintf("resumed from %s in %d ms", from, took.Milliseconds())
}

// noteKey carries, in a call's context, where Get leaves its resume note.
type noteKey struct{}

// WithNote returns ctx for Get and a function that returns the note Get
// left in it: how it brought the conversation's sandbox back ("resumed from
// paused in 12 ms"), "" when it did not.
func WithNote(ctx context.Context) (context.Context, func() string) {
	var (
		mu   sync.Mutex
		note string
	)
	set := func(s string) {
		mu.Lock()
		note = s
		mu.Unlock()
	}
	return context.WithValue(ctx, noteKey{}, set), func() string {
		mu.Lock()
		defer mu.Unlock()
		return note
	}
}

func leaveNote(ctx context.Context, note string) {
	if set, ok := ctx.Value(noteKey{}).(func(string)); ok && note != "" {
		set(note)
	}
}

// Status is what sandbox ls shows of a sandbox's life.
type Status struct {
	State    string
	LastUsed time.Time
	// Next is the policy's next step in words ("stops in 12m"), "" none.
	Next string
}

// Status returns a sandbox's state, last use and next policy step.
func (m *Manager) Status(ctx context.Context, sb store.Sandbox) Status {
	st := Status{State: stateOf(sb), LastUsed: sb.LastUsedAt}
	m.mu.Lock()
	if t := m.used[sb.ID]; t.After(st.LastUsed) {
		st.LastUsed = t
	}
	busy := m.active[sb.ID] > 0
	m.mu.Unlock()
	switch {
	case sb.Warm:
		st.Next = "warm: kept for the next conversation"
	case !sb.ExpiresAt.IsZero():
		st.Next = "removed in " + roughly(max(0, sb.ExpiresAt.Sub(m.o.Now())))
	case busy:
		st.Next = "in use"
	case m.newImagePending(ctx, sb):
		st.Next = "new image on next call"
	default:
		idle := m.o.Now().Sub(st.LastUsed)
		if p, err := m.policy(ctx, sb.OrgID, sb.Environment); err != nil {
			st.Next = "?"
		} else if s, ok := p.next(st.State, idle); ok {
			verb := map[string]string{store.SandboxPaused: "pauses", store.SandboxStopped: "stops", store.SandboxArchived: "archives", "": "removed"}[s.to]
			st.Next = verb + " in " + roughly(s.after-idle)
		}
	}
	return st
}

// roughly is d for a person, to the largest unit or two: "45s", "12m",
// "1h5m", "3d2h".
func roughly(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		h, m := int(d.Hours()), int(d.Minutes())%60
		if m == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%dm", h, m)
	}
	days, h := int(d.Hours())/24, int(d.Hours())%24
	if h == 0 {
		return fmt.Sprintf("%dd", days)
	}
	return fmt.Sprintf("%dd%dh", days, h)
}
