package hub

import (
	"bytes"
	"slices"
	"strings"
	"sync"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// minSecretLen is the shortest secret value redacted: a shorter one would
// blank out ordinary text wherever its letters occur.
const minSecretLen = 4

// redactor knows the resolved secret values each sandbox holds, for as long
// as the sandbox lives (in memory only), and replaces them with "[secret
// NAME]" in the activity records about it before they are stored.
type redactor struct {
	mu   sync.RWMutex
	held map[string][]heldSecret // sandbox id -> its secrets, longest value first
}

type heldSecret struct {
	name  string
	value []byte
	mark  []byte // "[secret NAME]"
}

func newRedactor() *redactor { return &redactor{held: map[string][]heldSecret{}} }

// hold remembers the secret values delivered to a sandbox.
func (r *redactor) hold(sandboxID string, values map[string][]byte) {
	var hs []heldSecret
	for name, v := range values {
		if len(v) < minSecretLen {
			continue
		}
		hs = append(hs, heldSecret{name: name, value: bytes.Clone(v), mark: []byte("[secret " + name + "]")})
	}
	if len(hs) == 0 {
		return
	}
	// Longest first: a value that contains another is replaced whole.
	slices.SortFunc(hs, func(a, b heldSecret) int { return len(b.value) - len(a.value) })
	r.mu.Lock()
	r.held[sandboxID] = hs
	r.mu.Unlock()
}

// forget drops a sandbox's secret values (it is gone).
func (r *redactor) forget(sandboxID string) {
	r.mu.Lock()
	delete(r.held, sandboxID)
	r.mu.Unlock()
}

// redact replaces the secret values the sandbox holds in the record's
// text and output with "[secret NAME]".
func (r *redactor) redact(sandboxID string, rec *agentdv1.ActivityRecord) {
	r.mu.RLock()
	hs := r.held[sandboxID]
	r.mu.RUnlock()
	if len(hs) == 0 {
		return
	}
	for _, s := range []*string{&rec.Summary, &rec.Command, &rec.Cwd, &rec.Path, &rec.Error, &rec.ObjectId, &rec.Actor, &rec.ClaimedActor, &rec.Conversation} {
		for _, h := range hs {
			if strings.Contains(*s, string(h.value)) {
				*s = strings.ReplaceAll(*s, string(h.value), string(h.mark))
			}
		}
	}
	for _, h := range hs {
		if bytes.Contains(rec.Output, h.value) {
			rec.Output = bytes.ReplaceAll(rec.Output, h.value, h.mark)
		}
	}
}
