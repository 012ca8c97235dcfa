package runner

import "sync"

// maxLookCache bounds the entries a lookCache holds: PATH lookups of
// names that do not exist are remembered too, and their names are the
// agent's to choose.
const maxLookCache = 4096

// lookCache remembers whether candidate paths of a PATH lookup are
// executables, for paths that cannot change while the daemon runs: those
// that resolve, symbolic links included, without leaving a root
// filesystem mounted read-only (a sandbox's image). Everything else, and
// every path whose answer cannot be proven permanent, is checked on each
// lookup as before. A nil *lookCache caches nothing.
//
// Why: in a container whose root is served by a user-space storage driver
// (fuse-overlayfs), each stat of the lookup is a round trip to that
// driver; see docs/performance.md.
type lookCache struct {
	// probe reports whether path's answer is permanent (platform code).
	probe func(path string) bool

	mu sync.Mutex
	m  map[string]error // candidate path → checkExecutable's result
}

// check is checkExecutable(path), remembered where the answer is
// permanent.
func (c *lookCache) check(path string) error {
	if c == nil {
		return checkExecutable(path)
	}
	c.mu.Lock()
	err, ok := c.m[path]
	c.mu.Unlock()
	if ok {
		return err
	}
	if !c.probe(path) {
		return checkExecutable(path)
	}
	err = checkExecutable(path)
	c.mu.Lock()
	if len(c.m) >= maxLookCache {
		clear(c.m)
	}
	c.m[path] = err
	c.mu.Unlock()
	return err
}
