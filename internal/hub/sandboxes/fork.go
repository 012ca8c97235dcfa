package sandboxes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/allowlist"
	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// A fork is a new conversation's sandbox whose /workspace starts as a copy
// of another sandbox's, taken at one instant: the source is paused (when
// it runs) while its workspace is copied into every fork's, and left in
// the state it was in. An engine that cannot pause (Kubernetes) copies a
// running source itself, when it can do so consistently (liveCopier). A fork runs what its source runs: the same
// environment and the same image (the source's pinned digest, even when
// the environment has moved its pin since), isolation and network.

// MaxForks bounds the forks of one request.
const MaxForks = 16

// maxConversation bounds a conversation name (bytes), as calls' routing
// does.
const maxConversation = 256

// Fork makes count new sandboxes of the org whose workspaces are copies of
// sandbox id's, and returns their ids: it builds them, copies into each,
// then starts them all at once. conv names the forks'
// conversations: conv itself for one fork, conv-1 … conv-N for several;
// "": generated (SOURCE-CONVERSATION-fork-XXXXXX). All of them fit under
// the org's caps or none is made, and a fork that fails removes every one
// this call made.
func (m *Manager) Fork(ctx context.Context, org store.Org, id string, count int, conv string) ([]string, error) {
	if count < 1 || count > MaxForks {
		return nil, errs.New(errs.Invalid, "fork count %d: want 1 to %d", count, MaxForks)
	}
	if err := checkConversation(conv); err != nil {
		return nil, err
	}
	src, err := m.o.Store.Sandbox(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && src.OrgID != org.ID) {
		return nil, fail(ErrNotFound, errs.NotFound, "sandbox %s not found in org %s; list them with 'agentctl sandbox ls'", id, org.Name)
	}
	if err != nil {
		return nil, unavailable("sandbox "+id, err)
	}
	switch {
	case src.Warm:
		return nil, errs.New(errs.Precondition, "sandbox %s is in the warm pool (no conversation yet): there is nothing to fork", id)
	case strings.HasPrefix(src.Conversation, ValidationConversation):
		return nil, errs.New(errs.Precondition, "sandbox %s validates an image: it is the hub's own", id)
	case src.HoldsSecrets:
		return nil, errs.New(errs.Precondition, "sandbox %s holds an agent run's secrets: its workspace is not copied into other sandboxes", id)
	case src.Hub != m.o.HubID:
		return nil, errs.New(errs.Unavailable, "sandbox %s is driven by another hub replica (%s): ask that replica to fork it", id, src.Hub)
	case src.ContainerID == "":
		return nil, errs.New(errs.Precondition, "sandbox %s has no container yet", id)
	}
	env, err := m.resolve(ctx, org, src.Environment)
	if err != nil {
		return nil, err
	}
	env.image = src.Image // the source's digest, not the environment's pin now
	// The source's allow list as it is now (changed by sandbox allow/deny
	// since it started, perhaps); without one, the environment's.
	if e, err := m.StoredEgress(ctx, src.ID); err == nil {
		list, err := allowlist.ParseList(e.Allow)
		if err != nil {
			return nil, unavailable("allow list of "+src.ID, err)
		}
		env.allow, env.network = list, "none"
	} else if !errors.Is(err, ErrNoAllowList) {
		return nil, unavailable("allow list of "+src.ID, err)
	} else if err := m.withEnvironmentAllow(ctx, org.ID, &env); err != nil {
		return nil, err
	}
	env.ttl, env.secrets = 0, false
	names := forkNames(src.Conversation, conv, count)
	if conv != "" && count > 1 {
		if err := checkConversation(names[len(names)-1]); err != nil {
			return nil, err
		}
	}
	for _, n := range names {
		if _, err := m.o.Store.ConversationSandbox(ctx, org.ID, env.name, n); err == nil {
			return nil, errs.New(errs.Exists, "conversation %q of environment %s has a sandbox already; pick another --conversation", n, env.name)
		}
	}
	m.quota.Lock()
	err = m.admitN(ctx, org, m.o.CallerToken(ctx), count)
	m.quota.Unlock()
	if err != nil {
		return nil, err
	}

	var forks []store.Sandbox
	done := false
	defer func() {
		if !done {
			for _, f := range forks {
				m.destroy(context.WithoutCancel(ctx), f, "its fork failed")
			}
		}
	}()
	for _, n := range names {
		f, err := m.build(ctx, org, env, n, false)
		if errors.Is(err, store.ErrConflict) {
			return nil, errs.New(errs.Exists, "conversation %q of environment %s has a sandbox already; pick another --conversation", n, env.name)
		}
		if err != nil {
			return nil, err
		}
		defer m.hold(f.ID)() // the reaper leaves it alone until it runs
		forks = append(forks, f)
	}
	if err := m.copyInto(ctx, src, forks); err != nil {
		return nil, err
	}
	// The N starts at once: each waits mostly on the engine and on its
	// agentd's connection, not on this process.
	ids := make([]string, len(forks))
	errs := make([]error, len(forks))
	var wg sync.WaitGroup
	for i, f := range forks {
		wg.Go(func() { errs[i] = m.launch(ctx, org, env, f) })
		ids[i] = f.ID
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		var left []store.Sandbox
		for i, f := range forks {
			if errs[i] == nil {
				left = append(left, f)
			}
		}
		forks = left // launch removed the others
		for _, e := range errs {
			if e != nil {
				return nil, e // the first: one error's kind for the status
			}
		}
	}
	done = true
	m.log.Info("sandbox forked", zap.String("sandbox", src.ID), zap.Strings("forks", ids))
	return ids, nil
}

// liveCopier is a driver that copies the workspace of a running container
// into several at one instant without pausing it (the Kubernetes driver
// freezes a bounded workspace's file system for the copies), or says
// sandbox.ErrNotSupported when it cannot.
type liveCopier interface {
	CopyRunningWorkspace(ctx context.Context, src string, dsts []string) error
}

// copyInto copies src's workspace into every fork's at one instant: src
// is paused meanwhile when it runs, and left as it was; an engine that
// cannot pause copies it running (liveCopier). Its lock keeps the policy
// and other requests from changing its state under the copy.
func (m *Manager) copyInto(ctx context.Context, src store.Sandbox, forks []store.Sandbox) (err error) {
	defer m.sbLock(src.ID)()
	defer m.hold(src.ID)()
	if now, err := m.o.Store.Sandbox(ctx, src.ID); err == nil {
		src = now
	}
	if stateOf(src) == store.SandboxRunning {
		err := m.o.Driver.Pause(ctx, src.ContainerID)
		if lc, ok := m.o.Driver.(liveCopier); ok && errors.Is(err, sandbox.ErrNotSupported) {
			dsts := make([]string, len(forks))
			for i, f := range forks {
				dsts[i] = f.ContainerID
			}
			if err := lc.CopyRunningWorkspace(ctx, src.ContainerID, dsts); err != nil {
				return EngineError(err, fmt.Sprintf("copy the workspace of running sandbox %s (this engine cannot pause it)", src.ID))
			}
			return nil
		}
		if err != nil {
			return EngineError(err, "pause sandbox "+src.ID+" for its fork")
		}
		defer func() {
			if uerr := m.o.Driver.Unpause(context.WithoutCancel(ctx), src.ContainerID); uerr != nil {
				m.log.Error("resuming a forked sandbox", zap.String("sandbox", src.ID), zap.Error(uerr))
				if err == nil {
					err = EngineError(uerr, "resume sandbox "+src.ID+" after its fork")
				}
			}
		}()
	}
	for _, f := range forks {
		if err := m.o.Driver.CopyWorkspace(ctx, src.ContainerID, f.ContainerID); err != nil {
			return EngineError(err, fmt.Sprintf("copy the workspace of sandbox %s", src.ID))
		}
	}
	return nil
}

// forkNames are the conversations of count forks of a sandbox of
// conversation from: conv, conv-1 … conv-N, or generated.
func forkNames(from, conv string, count int) []string {
	names := make([]string, count)
	for i := range names {
		switch {
		case conv != "" && count == 1:
			names[i] = conv
		case conv != "":
			names[i] = fmt.Sprintf("%s-%d", conv, i+1)
		default:
			b := make([]byte, 3)
			_, _ = rand.Read(b)
			names[i] = trimBytes(from, maxConversation-len("-fork-xxxxxx")) + "-fork-" + hex.EncodeToString(b)
		}
	}
	return names
}

// checkConversation refuses a fork's conversation name that no call could
// name: too long, or with control characters.
func checkConversation(conv string) error {
	if len(conv) > maxConversation || strings.IndexFunc(conv, unicode.IsControl) >= 0 || !utf8.ValidString(conv) || strings.HasPrefix(conv, "hub:") {
		return errs.New(errs.Invalid, "conversation id: want at most %d printable characters, not starting with 'hub:' (the hub's own)", maxConversation)
	}
	return nil
}

// trimBytes cuts s to at most n bytes, at a rune's start.
func trimBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
