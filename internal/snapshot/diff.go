package snapshot

import (
	"context"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// Diff compares snapshot fromID with snapshot toID or, when toID is empty,
// with the live tree at fromID's root (with the same excludes). Files of
// the live tree that look unchanged since fromID was taken are not read.
// Changes come sorted by path. Content, mode and link target count; a
// different modification time alone does not.
func (s *Store) Diff(ctx context.Context, fromID, toID string) ([]Change, error) {
	if err := checkID(fromID); err != nil {
		return nil, err
	}
	fromH, from, err := s.readManifest(fromID)
	if err != nil {
		return nil, err
	}
	var to []Entry
	if toID == "" {
		to, err = s.live(ctx, fromH, from)
	} else {
		if err := checkID(toID); err != nil {
			return nil, err
		}
		_, to, err = s.readManifest(toID)
	}
	if err != nil {
		return nil, err
	}
	return diffEntries(from, to), nil
}

// live lists and hashes the tree at h's root for a diff against entries.
func (s *Store) live(ctx context.Context, h *header, entries []Entry) ([]Entry, error) {
	snap := &h.Snapshot
	root, err := s.scanRoot(snap.Root, "root of snapshot "+snap.ID)
	if err != nil {
		if errs.KindOf(err) == errs.NotFound {
			return nil, errs.New(errs.NotFound, "the root %s of snapshot %s no longer exists: diff it against another snapshot instead", snap.Root, snap.ID)
		}
		return nil, err
	}
	excl, err := newExcluder(snap.Excludes)
	if err != nil {
		return nil, err
	}
	var index map[string]*Entry
	if h.FromTree {
		index = make(map[string]*Entry, len(entries))
		for i := range entries {
			if entries[i].Type == TypeFile {
				index[entries[i].Path] = &entries[i]
			}
		}
	}
	w := &walker{s: s, excl: excl, skipped: &skipList{}}
	nodes, err := w.walk(ctx, root)
	if err != nil {
		return nil, err
	}
	var toRead []int
	for i := range nodes {
		n := &nodes[i]
		if n.Type != TypeFile {
			continue
		}
		if e := index[n.Path]; unchanged(n, e) {
			n.SHA256 = e.SHA256
			continue
		}
		toRead = append(toRead, i)
	}
	skip := make([]bool, len(nodes))
	err = s.parallel(ctx, len(toRead), func(ctx context.Context, sc *scratch, k int) error {
		i := toRead[k]
		r, err := s.readFile(nil, &nodes[i], sc)
		skip[i] = r.skip != ""
		return err
	}, func(int) {})
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(nodes))
	for i := range nodes {
		if !skip[i] && !nodes[i].gone {
			out = append(out, nodes[i].Entry)
		}
	}
	return out, nil
}

// diffEntries compares two sorted entry lists.
func diffEntries(from, to []Entry) []Change {
	var out []Change
	i, j := 0, 0
	for i < len(from) || j < len(to) {
		switch {
		case j == len(to) || i < len(from) && from[i].Path < to[j].Path:
			out = append(out, Change{Path: from[i].Path, Kind: Removed, From: &from[i]})
			i++
		case i == len(from) || to[j].Path < from[i].Path:
			out = append(out, Change{Path: to[j].Path, Kind: Added, To: &to[j]})
			j++
		default:
			a, b := &from[i], &to[j]
			if k := compare(a, b); k != 0 {
				out = append(out, Change{Path: a.Path, Kind: k, From: a, To: b})
			}
			i++
			j++
		}
	}
	return out
}

// compare says how b differs from a at the same path (0: not at all).
func compare(a, b *Entry) ChangeKind {
	if a.Type != b.Type {
		return TypeChanged
	}
	switch a.Type {
	case TypeFile:
		if a.SHA256 != b.SHA256 || a.Mode != b.Mode {
			return Modified
		}
	case TypeDir:
		if a.Mode != b.Mode {
			return Modified
		}
	case TypeSymlink:
		if a.Target != b.Target {
			return Modified
		}
	}
	return 0
}
