package sandboxes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/hub/archive"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/units"
)

// Reading a stopped sandbox's workspace directly. The engine's archive
// API (Driver.ExportWorkspace) tars the workspace, the driver rewrites
// that tar, and the store parses and hashes it: three copies of every
// byte on a 2-core host, in one stream. A driver whose volumes the hub
// can read (Docker on this host, the hub root) offers MountWorkspace
// instead, and the store reads the files itself, several at a time
// (archive.Store.PutDir). After a restore, the hub keeps what it
// restored (the manifest's entries, and the instant the restore ended
// before the sandbox started) as the basis of the next archive: a file
// whose size, mode and mtime are the same and whose inode has not
// changed since (ctime) is not read again.

// WorkspaceMounter is a Driver that can also show the workspace of a
// container that does not run as a host directory (docker.Driver on the
// engine's host). Optional: without it the manager reads the workspace
// through ExportWorkspace.
type WorkspaceMounter interface {
	MountWorkspace(ctx context.Context, id string) (dir string, release func() error, err error)
}

// DirArchiver is an ArchiveStore that can also archive a directory
// (archive.Store).
type DirArchiver interface {
	PutDir(ctx context.Context, org, label, dir string, opts archive.DirOptions) (*archive.Manifest, error)
}

var _ DirArchiver = (*archive.Store)(nil)

// basisFile is where the basis of a sandbox's next archive is kept: in
// its directory of KeyDir (the hub's alone, removed with the sandbox).
func (m *Manager) basisFile(id string) string {
	if m.o.KeyDir == "" || !IsID(id) || filepath.Base(id) != id {
		return ""
	}
	return filepath.Join(m.o.KeyDir, id, "archive-basis.json")
}

// saveBasis keeps what a restore wrote into sb's workspace for its next
// archive. A failure only costs that archive a full read.
func (m *Manager) saveBasis(id string, man *archive.Manifest, before time.Time) {
	p := m.basisFile(id)
	if p == "" || man == nil {
		return
	}
	b := archive.Basis{Before: before}
	for _, e := range man.Entries {
		if e.Type == archive.TypeFile {
			b.Entries = append(b.Entries, e)
		}
	}
	data, err := json.Marshal(&b)
	if err == nil {
		err = os.MkdirAll(filepath.Dir(p), 0o700)
	}
	if err == nil {
		err = os.WriteFile(p+".new", data, 0o600)
	}
	if err == nil {
		err = os.Rename(p+".new", p)
	}
	if err != nil {
		m.log.Warn("keeping a restored workspace's basis for its next archive", zap.String("sandbox", id), zap.Error(err))
	}
}

// loadBasis returns sb's basis, or nil.
func (m *Manager) loadBasis(id string) *archive.Basis {
	p := m.basisFile(id)
	if p == "" {
		return nil
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	b := new(archive.Basis)
	if err := json.Unmarshal(data, b); err != nil {
		m.log.Warn("a sandbox's archive basis is unreadable: the archive reads every file", zap.String("sandbox", id), zap.Error(err))
		return nil
	}
	return b
}

// dropBasis removes sb's basis (its workspace is archived).
func (m *Manager) dropBasis(id string) {
	if p := m.basisFile(id); p != "" {
		_ = os.Remove(p)
	}
}

// putWorkspace archives the workspace of sb's stopped container: read
// directly when the driver and the store can, else through the engine's
// export. It says which way it went; its errors are the caller's.
func (m *Manager) putWorkspace(ctx context.Context, org, id, cid string) (*archive.Manifest, string, error) {
	mnt, okD := m.o.Driver.(WorkspaceMounter)
	da, okS := m.o.Archive.(DirArchiver)
	if okD && okS {
		dir, release, err := mnt.MountWorkspace(ctx, cid)
		switch {
		case err == nil:
			done := false
			var read int64
			progress := func(n int64) {
				read = n
				if !done && read >= 1<<20 {
					done = true
					m.hook(HookMidUpload)
				}
			}
			basis := m.loadBasis(id)
			man, err := da.PutDir(ctx, org, id, dir, archive.DirOptions{Basis: basis, Progress: progress})
			if rerr := release(); rerr != nil {
				m.log.Warn("releasing a workspace read for its archive", zap.String("sandbox", id), zap.Error(rerr))
			}
			how := fmt.Sprintf("direct, %s of files read", units.Bytes(read))
			if basis != nil {
				how = fmt.Sprintf("direct, %s of files read (the rest known from the restore)", units.Bytes(read))
			}
			if err != nil {
				return nil, how, archiveError(id, "archive", err)
			}
			return man, how, nil
		case ctx.Err() != nil || errors.Is(err, sandbox.ErrNotFound):
			return nil, "", EngineError(err, "archive sandbox "+id+": read its workspace")
		default:
			m.log.Info("reading the workspace through the engine's export", zap.String("sandbox", id), zap.Error(err))
		}
	}
	rc, err := m.o.Driver.ExportWorkspace(ctx, cid)
	if err != nil {
		return nil, "", EngineError(err, "archive sandbox "+id+": read its workspace")
	}
	defer rc.Close()
	man, err := m.o.Archive.Put(ctx, org, id, &hookReader{r: rc, m: m})
	if err != nil {
		return nil, "", archiveError(id, "archive", err)
	}
	return man, "engine export", nil
}
