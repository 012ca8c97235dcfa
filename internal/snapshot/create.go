package snapshot

import (
	"context"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// Create snapshots the directory tree at root (an absolute path), leaving
// out paths that match excludes. Files that look unchanged since the last
// snapshot of the same root are taken from it without being read; the
// rest are hashed and compressed on the store's workers. progress, if not
// nil, is called on the calling goroutine: once the tree has been listed
// (with the totals) and after every file.
//
// Unreadable files and directories, sockets, devices and named pipes are
// skipped and listed in Snapshot.Skipped; only a failure of the store
// (disk full, say) or of the root itself fails the snapshot, and then no
// trace of it is left.
func (s *Store) Create(ctx context.Context, root string, excludes []string, label string, progress func(Progress)) (*Snapshot, error) {
	if progress == nil {
		progress = func(Progress) {}
	}
	start := s.opts.Now()
	root, err := s.scanRoot(root, "snapshot root")
	if err != nil {
		return nil, err
	}
	excl, err := newExcluder(excludes)
	if err != nil {
		return nil, err
	}
	if err := checkLabel(label); err != nil {
		return nil, err
	}

	o := s.writeOp()
	ok := false
	defer func() { o.end(ok) }()

	index := s.lastIndex(ctx, root, o)
	w := &walker{s: s, excl: excl, skipped: &skipList{}}
	nodes, err := w.walk(ctx, root)
	if err != nil {
		return nil, err
	}

	var pr Progress
	var toRead []int
	for i := range nodes {
		n := &nodes[i]
		if n.Type != TypeFile {
			continue
		}
		pr.FilesTotal++
		pr.BytesTotal += n.Size
		if e := index[n.Path]; unchanged(n, e) {
			n.SHA256 = e.SHA256
			pr.FilesDone++
			pr.BytesDone += n.Size
			continue
		}
		toRead = append(toRead, i)
	}
	progress(pr)

	results := make([]readResult, len(nodes))
	var stored int64
	err = s.parallel(ctx, len(toRead), func(ctx context.Context, sc *scratch, k int) error {
		i := toRead[k]
		r, err := s.readFile(o, &nodes[i], sc)
		results[i] = r
		return err
	}, func(k int) {
		i := toRead[k]
		n := &nodes[i]
		stored += results[i].stored
		pr.FilesDone++
		pr.BytesDone += n.Size
		progress(pr)
	})
	if err != nil {
		return nil, errs.Wrap(errs.KindOf(err), err, "snapshot of %s failed, nothing was saved", root)
	}

	snap := &Snapshot{
		ID:          newID(start),
		Label:       label,
		Root:        root,
		Created:     start,
		StoredBytes: stored,
		Excludes:    excludes,
	}
	racyAfter := start.Add(-s.opts.RacyWindow).UnixNano()
	entries := make([]Entry, 0, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		if r := results[i]; r.skip != "" {
			w.skipped.add(n.Path, r.skip)
			continue
		}
		if n.gone {
			continue
		}
		switch n.Type {
		case TypeFile:
			snap.Files++
			snap.TotalBytes += n.Size
			if n.ModTime.UnixNano() >= racyAfter || n.stamp.ctime >= racyAfter {
				n.stamp.racy = true
			}
		case TypeDir:
			snap.Dirs++
			n.stamp = stamp{}
		case TypeSymlink:
			snap.Symlinks++
			n.stamp = stamp{}
		}
		entries = append(entries, n.Entry)
	}
	snap.Skipped = w.skipped.sorted()
	snap.SkippedMore = w.skipped.more

	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := o.commit(); err != nil {
		return nil, err
	}
	if err := s.writeManifest(&header{Snapshot: *snap, FromTree: true}, entries); err != nil {
		return nil, storeError(err)
	}
	ok = true
	return snap, nil
}

// lastIndex returns the files of the newest snapshot taken of root, by path,
// with their blobs pinned to o — or nil if there is none.
func (s *Store) lastIndex(ctx context.Context, root string, o *op) map[string]*Entry {
	hs, err := s.headers(ctx)
	if err != nil {
		return nil
	}
	for i := len(hs) - 1; i >= 0; i-- {
		h := &hs[i].Snapshot
		if !hs[i].FromTree || h.Root != root {
			continue
		}
		_, entries, err := s.pinSnapshot(h.ID, o)
		if err != nil {
			s.log.Warn("snapshot index unusable: every file is read again", zap.String("id", h.ID), zap.Error(err))
			return nil
		}
		index := make(map[string]*Entry, len(entries))
		for j := range entries {
			if entries[j].Type == TypeFile {
				index[entries[j].Path] = &entries[j]
			}
		}
		return index
	}
	return nil
}

func checkLabel(label string) error {
	if len(label) > MaxLabelBytes {
		return errs.New(errs.Invalid, "label of %d bytes: at most %d", len(label), MaxLabelBytes)
	}
	if !utf8.ValidString(label) {
		return errs.New(errs.Invalid, "label is not valid UTF-8")
	}
	return nil
}
