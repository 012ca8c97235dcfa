package archive

import (
	"context"
	"errors"
	"path"
	"strings"

	"go.uber.org/zap"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// ErrBusy is matched (errors.Is) by GC's error when an archive of the
// org is being written: GC sweeps nothing then, and can be run again
// later.
var ErrBusy = errors.New("an archive is being written")

// Delete removes archive id of org: its manifest. The blobs no other
// archive names are removed by the next GC.
func (s *Store) Delete(ctx context.Context, org, id string) error {
	if err := checkOrg(org); err != nil {
		return err
	}
	if err := checkID(id); err != nil {
		return err
	}
	key := manifestKey(org, id)
	if err := s.bucket.Delete(ctx, key); err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return errs.New(errs.NotFound, "no archive %s in org %s", id, org)
		}
		return storeError(err, "delete archive %s", id)
	}
	return nil
}

// GCStats tells what GC did.
type GCStats struct {
	// Archives is how many manifests were read (the marks).
	Archives int
	// Kept is how many blobs are named by a manifest or too young to go.
	Kept int
	// Removed and RemovedBytes count the objects GC removed: blobs no
	// manifest names, and files a crashed upload left half-written.
	Removed      int
	RemovedBytes int64
	// StalePending counts the pending markers of crashed Puts removed.
	StalePending int
}

// GC removes what no archive of org needs: blobs no manifest names and
// the half-written files of crashed uploads, when older than
// Options.Grace; and pending markers older than Options.PendingTimeout
// (their Put died). While a Put of org runs (a pending marker younger
// than PendingTimeout, in this or another process) GC removes no blob
// and returns an error matching ErrBusy.
func (s *Store) GC(ctx context.Context, org string) (GCStats, error) {
	var st GCStats
	if err := checkOrg(org); err != nil {
		return st, err
	}
	l := s.orgLock(org)
	if !l.TryLock() {
		return st, errs.Wrap(errs.Unavailable, ErrBusy, "archive store GC of org %s: an archive is being written in this process; try again later", org)
	}
	defer l.Unlock()
	now := s.opts.Now()

	var busy string
	err := s.each(ctx, pendingPrefix(org), func(o *blob.ListObject) error {
		if now.Sub(o.ModTime) < s.opts.PendingTimeout {
			busy = path.Base(o.Key)
			return nil
		}
		s.log.Warn("removing the pending marker of an archive that was never finished", zap.String("key", o.Key), zap.Time("since", o.ModTime))
		if err := s.bucket.Delete(ctx, o.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return storeError(err, "remove %s", o.Key)
		}
		st.StalePending++
		return nil
	})
	if err != nil {
		return st, err
	}
	if busy != "" {
		return st, errs.Wrap(errs.Unavailable, ErrBusy, "archive store GC of org %s: archive %s is being written; try again later", org, busy)
	}

	// Mark. One manifest that cannot be read stops GC: sweeping without
	// its marks would take its blobs.
	ids, err := s.List(ctx, org)
	if err != nil {
		return st, err
	}
	marked := make(map[string]bool)
	for _, id := range ids {
		m, err := s.Get(ctx, org, id)
		if errs.KindOf(err) == errs.NotFound {
			continue // deleted meanwhile
		}
		if err != nil {
			return st, err
		}
		st.Archives++
		for _, e := range m.Entries {
			if e.Type == TypeFile {
				marked[e.SHA256] = true
			}
		}
	}

	// Sweep.
	sweep := func(prefix string, keep func(key string) bool) error {
		return s.each(ctx, prefix, func(o *blob.ListObject) error {
			if keep(o.Key) || now.Sub(o.ModTime) < s.opts.Grace {
				st.Kept++
				return nil
			}
			if err := s.bucket.Delete(ctx, o.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
				return storeError(err, "remove %s", o.Key)
			}
			st.Removed++
			st.RemovedBytes += o.Size
			return nil
		})
	}
	err = sweep(blobPrefix(org), func(key string) bool {
		sum := path.Base(key)
		return hexRE.MatchString(sum) && key == blobKey(org, sum) && marked[sum]
	})
	if err != nil {
		return st, err
	}
	err = sweep(manifestPrefix(org), func(key string) bool {
		id, ok := strings.CutSuffix(path.Base(key), ".json")
		return ok && idRE.MatchString(id) && key == manifestKey(org, id)
	})
	return st, err
}

// Usage returns the bytes org's archives occupy in the store: blobs
// (each counted once, however many archives name it) and manifests.
func (s *Store) Usage(ctx context.Context, org string) (int64, error) {
	if err := checkOrg(org); err != nil {
		return 0, err
	}
	var n int64
	err := s.each(ctx, orgPrefix(org), func(o *blob.ListObject) error {
		n += o.Size
		return nil
	})
	return n, err
}
