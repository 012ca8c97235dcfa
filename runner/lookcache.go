package runner

import "sync"

// maxLookCache bounds the entries a lookCache holds: PATH lookups of
// names that do not exist are remembered too, and their names are the
// agent's to choose.
const maxLookCache = 4096

// lookCache remembers whether candidate paths of a PATH lookup are
// executables, for paths that cannot change while the daemon runs: those
// that resolve, symbolic links included, without leaving a root
// filesystem mounted read-only (a sandbox's image). Every other path is
// checked on each lookup as before (only the verdict that it is not
// permanent is remembered). A nil *lookCache caches nothing.
//
// Why: in a container whose root is served by a user-space storage driver
// (fuse-overlayfs), each stat of the lookup is a round trip to that
// driver; see docs/performance-history.md (fuse-overlayfs round trips).
type lookCache struct {
	// probe reports whether path's answer is permanent (platform code).
	probe func(path string) bool

	mu sync.Mutex
	m  map[string]lookResult // by candidate path
}

// lookResult is what a lookCache knows of a candidate path: whether its
// answer is permanent (the probe's verdict, itself permanent: the mounts
// and the read-only root cannot change), and if so the answer.
type lookResult struct {
	permanent bool
	err       error // checkExecutable's result, when permanent
}

// check is checkExecutable(path), remembered where the answer is
// permanent.
func (c *lookCache) check(path string) error {
	if c == nil {
		return checkExecutable(path)
	}
	c.mu.Lock()
	r, ok := c.m[path]
	c.mu.Unlock()
	switch {
	case ok && r.permanent:
		return r.err
	case ok:
		return checkExecutable(path)
	}
	r = lookResult{permanent: c.probe(path)}
	err := checkExecutable(path)
	if r.permanent {
		r.err = err
	}
	c.mu.Lock()
	if len(c.m) >= maxLookCache {
		clear(c.m)
	}
	c.m[path] = r
	c.mu.Unlock()
	return err
}
