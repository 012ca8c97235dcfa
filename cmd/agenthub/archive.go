package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/hub/archive"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/units"
)

// archiveSettings are the archived state's settings, read from the flags.
type archiveSettings struct {
	store  *archive.Store // nil: archiving off
	after  time.Duration
	orgMax int64
}

// archive reads --sandbox-archive-after, --archive-url, --archive-shared
// and --org-max-archive, and opens the archive store. Without
// --archive-url it is file:// "archive" beside a SQLite --db; with a
// Postgres --db there is none (archiving off, said in the log): a default
// directory on one replica's disk would hold workspaces the other
// replicas cannot restore, and a hub that refused to start by default
// would break every replica set. A file:// URL on Postgres needs
// --archive-shared, saying every replica sees that directory.
func (f *sandboxFlags) archive(ctx context.Context, db string, log *zap.Logger) (archiveSettings, func(), error) {
	none := func() {}
	var out archiveSettings
	after := f.archiveAfter
	if after == "" {
		after = "7d"
	}
	d, err := sandboxes.ParsePolicyDuration(after)
	if err != nil {
		return out, none, usageError{fmt.Errorf("--sandbox-archive-after %s: %w", after, err)}
	}
	out.after = d
	limit := f.orgMaxArchive
	if limit == "" {
		limit = "50GB"
	}
	if out.orgMax, err = units.ParseBytes(limit); err != nil || out.orgMax < 0 {
		return out, none, usageError{fmt.Errorf("--org-max-archive %s: want a size like 50GB or 200GiB, or 0 (no limit)", limit)}
	}
	raw := f.archiveURL
	switch {
	case raw == "" && isPostgres(db):
		if d != store.Never {
			log.Warn("archived sandboxes are off: a postgres:// --db needs an --archive-url every replica reaches (s3://…, or a shared file:// with --archive-shared); stopped sandboxes stay stopped")
		}
		out.after = store.Never
		return out, none, nil
	case raw == "":
		// Absolute, whatever --db was given as (hub.db: the current
		// directory's): a file URL needs an absolute directory.
		dir, err := filepath.Abs(filepath.Join(dataDir(db), "archive"))
		if err != nil {
			return out, none, fmt.Errorf("archive directory beside --db: %w", err)
		}
		raw = (&url.URL{Scheme: "file", Path: dir}).String()
	case strings.HasPrefix(raw, "file:") && isPostgres(db) && !f.archiveShared:
		return out, none, usageError{fmt.Errorf("--archive-url %s: replicas on Postgres need an archive store every replica reaches, so that any of them restores what another archived; give s3://…, or --archive-shared if that directory is shared by every replica", raw)}
	}
	s, err := archive.Open(ctx, raw, archive.Options{Logger: log.Named("archive")})
	if err != nil {
		return out, none, usageError{fmt.Errorf("--archive-url: %w", err)}
	}
	out.store = s
	log.Info("archived sandboxes on", zap.Stringer("archive_after", d), zap.Int64("org_max_archive", out.orgMax))
	return out, func() { _ = s.Close() }, nil
}

// crashEnv names the archive step at which agenthub kills itself
// (SIGKILL, as kill -9): the tests of "nothing lost" use it. Unset: never.
const crashEnv = "AGENTD_TEST_ARCHIVE_CRASH"

// crashHook is Options.ArchiveHook from crashEnv, nil when it is unset.
func crashHook() func(string) {
	at := os.Getenv(crashEnv)
	if at == "" {
		return nil
	}
	return func(point string) {
		if point != at {
			return
		}
		fmt.Fprintf(os.Stderr, "agenthub: %s=%s: killing myself\n", crashEnv, at)
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			_ = p.Kill()
		}
		time.Sleep(time.Minute) // the signal is on its way
		panic(errors.New("not killed"))
	}
}
