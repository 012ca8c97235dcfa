package activitylog

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
//
// A sandbox that holds secrets whose values this process does not know (the
// hub restarted since the run began, or the record is made on another
// replica) gets its records' text withheld instead: fail closed.
type redactor struct {
	// holds says whether a sandbox holds an agent run's secrets, as the
	// store recorded at its creation. Nil: no such check.
	holds func(sandboxID string) (bool, error)

	mu    sync.RWMutex
	held  map[string][]heldSecret // sandbox id -> its secrets, longest value first
	known map[string]bool         // sandbox id -> holds secrets, per holds
}

type heldSecret struct {
	name  string
	value []byte
	mark  []byte // "[secret NAME]"
}

func newRedactor() *redactor {
	return &redactor{held: map[string][]heldSecret{}, known: map[string]bool{}}
}

// withheld is what stands for the text of a record about a sandbox that
// holds secrets this hub does not know the values of.
const withheld = "[withheld: the sandbox holds secrets whose values this hub process does not know]"

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
	delete(r.known, sandboxID)
	r.mu.Unlock()
}

// redact replaces the secret values the sandbox holds in the record's
// text and output with "[secret NAME]".
func (r *redactor) redact(sandboxID string, rec *agentdv1.ActivityRecord) {
	r.mu.RLock()
	hs := r.held[sandboxID]
	r.mu.RUnlock()
	if len(hs) == 0 {
		if r.blind(sandboxID) {
			rec.Summary, rec.Command, rec.Error = withheld, "", ""
			if len(rec.Output) > 0 {
				rec.Output = []byte(withheld)
			}
		}
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

// blind tells whether the sandbox holds secrets whose values are not
// known here. Asked of the store once per sandbox (what it holds is fixed
// when it is made); a failed lookup counts as holding them.
func (r *redactor) blind(sandboxID string) bool {
	if r.holds == nil || !strings.HasPrefix(sandboxID, "sb-") {
		return false
	}
	r.mu.RLock()
	holds, ok := r.known[sandboxID]
	r.mu.RUnlock()
	if ok {
		return holds
	}
	holds, err := r.holds(sandboxID)
	if err != nil {
		return true // not cached: asked again next time
	}
	r.mu.Lock()
	r.known[sandboxID] = holds
	r.mu.Unlock()
	return holds
}
