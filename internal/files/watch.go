package files

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// WatchOptions says what Watch reports.
type WatchOptions struct {
	// Path is the directory watched, with everything below it ("": the
	// workspace).
	Path string
	// Hidden also reports names starting with "." (.git never).
	Hidden bool
	// NoIgnore reports paths .gitignore files exclude as well.
	NoIgnore bool
	// Coalesce is how long changes are gathered before a batch (0:
	// DefaultCoalesce; at most MaxCoalesce).
	Coalesce time.Duration
}

// Watch's coalescing window: the default and the most a caller may ask.
const (
	DefaultCoalesce = 100 * time.Millisecond
	MaxCoalesce     = 10 * time.Second
)

// maxWatchBatch bounds the events of one batch (a message well below gRPC's 4
// MiB); a window with more is sent as several batches.
const maxWatchBatch = 2000

// WatchOp is what happened to a path.
type WatchOp uint8

// The changes Watch reports.
const (
	WatchCreated WatchOp = iota + 1
	WatchWritten
	WatchRemoved
	WatchRenamed // moved away; the new name, if inside, is WatchCreated
	WatchAttributes
)

// WatchEvent is one change to an absolute path.
type WatchEvent struct {
	Path string
	Op   WatchOp
	Dir  bool
}

// WatchBatch is what one coalescing window gathered: the changes, in the
// order they first happened, or Overflow when some were lost (the client
// rescans).
type WatchBatch struct {
	Events   []WatchEvent
	Overflow string // why changes were lost ("": none were)
}

// Watch reports changes below a directory until ctx ends: recursively
// (directories created later are watched as they appear, and what was
// written into them before their watch was in place is reported as
// created), skipping hidden and ignored paths as Search does, coalesced
// into batches. ready is called once the watch is in place, with the
// directory and the number of directories watched. A .gitignore changed
// while watching applies to its own directory from then on.
//
// Nothing is dropped silently: when the kernel's queue overflows, emit gets
// a batch with Overflow set. Watch returns nil when ctx ends, and the
// error of emit or of the watcher otherwise.
func (f *FS) Watch(ctx context.Context, opts WatchOptions, ready func(root string, dirs int) error, emit func(WatchBatch) error) error {
	p := opts.Path
	if p == "" {
		p = f.workspace
	}
	root, err := f.Resolve(p)
	if err != nil {
		return err
	}
	fi, err := os.Stat(root)
	if err != nil {
		return f.pathError(root, err)
	}
	if !fi.IsDir() {
		return errs.New(errs.Invalid, "%s is not a directory: watch the directory that holds it", root)
	}
	window := opts.Coalesce
	switch {
	case window < 0 || window > MaxCoalesce:
		return errs.New(errs.Invalid, "coalesce %s: want 0 (the default, %s) to %s", window, DefaultCoalesce, MaxCoalesce)
	case window == 0:
		window = DefaultCoalesce
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return watchLimit(err, root)
	}
	defer w.Close()
	wt := &watchTree{w: w, root: root, opts: opts, dirs: map[string]ignoreRules{}}
	if !opts.NoIgnore {
		wt.base = ancestorRules(root)
	}
	if err := wt.add(ctx, root, wt.base, nil); err != nil {
		return err
	}
	if err := ready(root, len(wt.dirs)); err != nil {
		return err
	}

	var pend pending
	timer := time.NewTimer(window)
	timer.Stop()
	armed := false
	flush := func() error {
		armed = false
		for len(pend.order) > 0 || pend.overflow != "" {
			b := pend.take(maxWatchBatch)
			if err := emit(b); err != nil {
				return err
			}
		}
		return nil
	}
	note := func(ev WatchEvent) {
		pend.add(ev)
		if !armed {
			timer.Reset(window)
			armed = true
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
			if err := flush(); err != nil {
				return err
			}
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if err := wt.handle(ctx, ev, note); err != nil {
				return err
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			if !errors.Is(err, fsnotify.ErrEventOverflow) {
				return errs.Wrap(errs.Unknown, err, "watching %s", root)
			}
			pend.overflow = "the kernel's event queue overflowed (fs.inotify.max_queued_events): changes were lost; rescan " + root
			if err := flush(); err != nil {
				return err
			}
		}
	}
}

// watchTree is the set of watched directories and their ignore rules.
type watchTree struct {
	w    *fsnotify.Watcher
	root string
	opts WatchOptions
	base ignoreRules            // the rules from outside root
	dirs map[string]ignoreRules // watched directory → the rules in force in it
}

// skip reports whether path (below root) is not reported: hidden, .git, or
// ignored by the rules of its directory.
func (wt *watchTree) skip(path string, isDir bool) bool {
	rel, err := filepath.Rel(wt.root, path)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return true
	}
	for _, seg := range strings.Split(filepath.ToSlash(rel), "/") {
		if seg == ".git" || (!wt.opts.Hidden && strings.HasPrefix(seg, ".")) {
			return true
		}
	}
	if wt.opts.NoIgnore {
		return false
	}
	rules, ok := wt.dirs[filepath.Dir(path)]
	if !ok {
		return true // its directory is not watched: ignored itself
	}
	return rules.ignored(path, isDir)
}

// add watches dir and the directories below it that are not skipped. With
// note set (a directory that appeared while watching), every entry found
// is reported as created: it may have been written before the watch was in
// place.
func (wt *watchTree) add(ctx context.Context, dir string, parent ignoreRules, note func(WatchEvent)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := wt.w.Add(dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil // gone already; its removal is reported
		}
		if errors.Is(err, fs.ErrPermission) && dir != wt.root {
			return nil // not ours to read: what is below it is not watched, the rest is
		}
		return watchLimit(err, dir)
	}
	rules := parent
	if !wt.opts.NoIgnore {
		rules = parent.with(dir)
	}
	wt.dirs[dir] = rules
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil // unreadable or gone: nothing below to watch
	}
	for _, de := range des {
		p := filepath.Join(dir, de.Name())
		isDir := de.IsDir()
		if wt.skip(p, isDir) {
			continue
		}
		if note != nil {
			note(WatchEvent{Path: p, Op: WatchCreated, Dir: isDir})
		}
		if isDir {
			if err := wt.add(ctx, p, rules, note); err != nil {
				return err
			}
		}
	}
	return nil
}

// handle turns one fsnotify event into what is reported, and watches a
// directory that appeared.
func (wt *watchTree) handle(ctx context.Context, ev fsnotify.Event, note func(WatchEvent)) error {
	path := filepath.Clean(ev.Name)
	if path == wt.root && (ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename)) {
		return errs.New(errs.NotFound, "the watched directory %s was removed or renamed", wt.root)
	}
	if filepath.Base(path) == ".gitignore" && !wt.opts.NoIgnore {
		// Its rules change, however it changed (editors save by
		// renaming), and whether or not .gitignore itself is reported.
		wt.reloadRules(filepath.Dir(path))
	}
	_, watched := wt.dirs[path]
	isDir := watched
	if ev.Has(fsnotify.Create) || ev.Has(fsnotify.Write) || ev.Has(fsnotify.Chmod) {
		if fi, err := os.Lstat(path); err == nil {
			isDir = fi.IsDir()
		}
	}
	if wt.skip(path, isDir) {
		return nil
	}
	switch {
	case ev.Has(fsnotify.Create):
		note(WatchEvent{Path: path, Op: WatchCreated, Dir: isDir})
		if isDir && !watched {
			return wt.add(ctx, path, wt.dirs[filepath.Dir(path)], note)
		}
	case ev.Has(fsnotify.Remove), ev.Has(fsnotify.Rename):
		op := WatchRemoved
		if ev.Has(fsnotify.Rename) {
			op = WatchRenamed
		}
		note(WatchEvent{Path: path, Op: op, Dir: isDir})
		if isDir {
			wt.forget(path)
		}
	case ev.Has(fsnotify.Write):
		note(WatchEvent{Path: path, Op: WatchWritten, Dir: isDir})
	case ev.Has(fsnotify.Chmod):
		note(WatchEvent{Path: path, Op: WatchAttributes, Dir: isDir})
	}
	return nil
}

// reloadRules reads dir's .gitignore again (dir's own rules; those of the
// directories below it follow at their next change).
func (wt *watchTree) reloadRules(dir string) {
	if _, ok := wt.dirs[dir]; !ok {
		return
	}
	parent := wt.base
	if dir != wt.root {
		parent = wt.dirs[filepath.Dir(dir)]
	}
	wt.dirs[dir] = parent.with(dir)
}

// forget drops dir and the directories below it (their watches went with
// them, or now follow a name outside the tree).
func (wt *watchTree) forget(dir string) {
	prefix := dir + string(filepath.Separator)
	for d := range wt.dirs {
		if d == dir || strings.HasPrefix(d, prefix) {
			_ = wt.w.Remove(d)
			delete(wt.dirs, d)
		}
	}
}

// watchLimit explains the kernel's limits on watches, the usual reason a
// watch cannot be added.
func watchLimit(err error, path string) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EMFILE) {
		return errs.Wrap(errs.Exhausted, err, "watching %s: the kernel's limit on watches is reached (fs.inotify.max_user_watches, max_user_instances); watch a smaller tree or raise the limit", path)
	}
	return errs.Wrap(errs.Unknown, err, "watching %s", path)
}

// pending are the changes of the current window, one per path.
type pending struct {
	order    []string
	byPath   map[string]*WatchEvent
	overflow string
}

func (p *pending) add(ev WatchEvent) {
	if p.byPath == nil {
		p.byPath = map[string]*WatchEvent{}
	}
	if prev, ok := p.byPath[ev.Path]; ok {
		// Created then written (or its mode set) in one window stays
		// created: the client learns of a new file once.
		if !(prev.Op == WatchCreated && (ev.Op == WatchWritten || ev.Op == WatchAttributes)) {
			prev.Op = ev.Op
		}
		prev.Dir = ev.Dir
		return
	}
	e := ev
	p.byPath[ev.Path] = &e
	p.order = append(p.order, ev.Path)
}

// take returns up to n events (or, once they are out, the overflow) and
// removes them.
func (p *pending) take(n int) WatchBatch {
	if len(p.order) == 0 {
		b := WatchBatch{Overflow: p.overflow}
		p.overflow = ""
		return b
	}
	if n > len(p.order) {
		n = len(p.order)
	}
	b := WatchBatch{Events: make([]WatchEvent, 0, n)}
	for _, path := range p.order[:n] {
		b.Events = append(b.Events, *p.byPath[path])
		delete(p.byPath, path)
	}
	p.order = p.order[n:]
	return b
}

// String names an op as agentctl watch prints it.
func (op WatchOp) String() string {
	switch op {
	case WatchCreated:
		return "created"
	case WatchWritten:
		return "written"
	case WatchRemoved:
		return "removed"
	case WatchRenamed:
		return "renamed"
	case WatchAttributes:
		return "attributes"
	}
	return fmt.Sprintf("op(%d)", op)
}
