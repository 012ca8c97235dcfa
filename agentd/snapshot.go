package agentd

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/devdepot-ai/agentd/internal/activity"
	"github.com/devdepot-ai/agentd/internal/snapshot"
	"github.com/devdepot-ai/agentd/internal/units"
	"github.com/devdepot-ai/agentd/internal/wire"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// Streaming limits of the snapshot service.
const (
	// snapshotProgressEvery throttles Progress messages of Create and Restore.
	snapshotProgressEvery = 100 * time.Millisecond
	// snapExportChunk is the most tar bytes one Export message carries.
	snapExportChunk = wire.ChunkSize
)

// snapshotService serves agentdv1.SnapshotService from the snapshot store
// in the state directory. Relative roots and targets resolve against the
// workspace.
type snapshotService struct {
	agentdv1.UnimplementedSnapshotServiceServer
	s     *Server
	store *snapshot.Store
}

var _ agentdv1.SnapshotServiceServer = (*snapshotService)(nil)

func newSnapshotService(ctx context.Context, s *Server) (*snapshotService, error) {
	store, err := snapshot.Open(snapshot.Options{
		Dir: filepath.Join(s.opts.StateDir, "snapshots"),
		// Never copy the daemon's own state (the store, the audit log, the
		// socket) into a snapshot of a tree that holds it, nor delete it
		// when restoring one with delete_extra.
		Protect: []string{s.opts.StateDir},
		Logger:  s.log.Named("snapshot"),
	})
	if err != nil {
		return nil, err
	}
	return &snapshotService{s: s, store: store}, nil
}

// resolve makes p absolute: empty is the workspace, "~" the home
// directory, a relative path is relative to the workspace.
func (h *snapshotService) resolve(p, field string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", invalidf("%s contains a NUL byte", field)
	}
	ws := h.s.opts.Workspace
	switch {
	case p == "":
		return ws, nil
	case p == "~" || strings.HasPrefix(p, "~/"):
		home, err := os.UserHomeDir()
		if err != nil {
			return "", invalidf("%s %q: no home directory to expand ~ to", field, p)
		}
		return filepath.Join(home, strings.TrimPrefix(p[1:], "/")), nil
	case !filepath.IsAbs(p):
		return filepath.Join(ws, p), nil
	}
	return filepath.Clean(p), nil
}

// throttle returns a progress callback that sends at most one message per
// snapshotProgressEvery (the first at once), and a func that sends the
// last state unconditionally.
func snapThrottle(send func(*agentdv1.Progress) error) (func(snapshot.Progress), func()) {
	var last time.Time
	var cur snapshot.Progress
	failed := false
	emit := func() {
		if failed {
			return
		}
		// A client that went away also cancels the call's context, which
		// ends the operation; nothing more to do here.
		failed = send(snapProgressToProto(cur)) != nil
	}
	return func(p snapshot.Progress) {
			cur = p
			if now := time.Now(); last.IsZero() || now.Sub(last) >= snapshotProgressEvery {
				last = now
				emit()
			}
		}, func() {
			emit()
		}
}

// Create snapshots a tree, streaming progress, then the snapshot.
func (h *snapshotService) Create(req *agentdv1.CreateRequest, stream agentdv1.SnapshotService_CreateServer) error {
	ctx := stream.Context()
	root, err := h.resolve(req.GetRoot(), "root")
	if err != nil {
		return err
	}
	send := func(p *agentdv1.Progress) error {
		return stream.Send(&agentdv1.CreateResponse{Event: &agentdv1.CreateResponse_Progress{Progress: p}})
	}
	progress, flush := snapThrottle(send)
	start := time.Now()
	snap, err := h.store.Create(ctx, root, req.GetExcludes(), req.GetLabel(), progress)
	rec := activity.Record{Kind: wire.KindSnapshotCreate, Path: root, Duration: time.Since(start)}
	if err != nil {
		rec.Summary, rec.Outcome, rec.Error = "snapshot of "+root+" failed", activity.Failed, err.Error()
		h.s.record(ctx, rec)
		return err
	}
	rec.Summary = fmt.Sprintf("snapshot %s of %s: %d files, %s (%s new)", snap.ID, root, snap.Files, units.Bytes(snap.TotalBytes), units.Bytes(snap.StoredBytes))
	if len(snap.Skipped) > 0 {
		rec.Summary += fmt.Sprintf(", %d skipped", int64(len(snap.Skipped))+snap.SkippedMore)
	}
	rec.Outcome, rec.Bytes, rec.ObjectID = activity.OK, snap.TotalBytes, snap.ID
	h.s.record(ctx, rec)
	flush()
	return stream.Send(&agentdv1.CreateResponse{Event: &agentdv1.CreateResponse_Snapshot{Snapshot: snapToProto(snap)}})
}

// List lists the snapshots, oldest first.
func (h *snapshotService) List(ctx context.Context, _ *agentdv1.SnapshotServiceListRequest) (*agentdv1.SnapshotServiceListResponse, error) {
	list, err := h.store.List(ctx)
	if err != nil {
		return nil, err
	}
	resp := &agentdv1.SnapshotServiceListResponse{Snapshots: make([]*agentdv1.Snapshot, len(list))}
	for i, s := range list {
		resp.Snapshots[i] = snapToProto(s)
	}
	return resp, nil
}

// Get returns a snapshot with its manifest.
func (h *snapshotService) Get(ctx context.Context, req *agentdv1.GetRequest) (*agentdv1.GetResponse, error) {
	snap, entries, err := h.store.Get(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	resp := &agentdv1.GetResponse{Snapshot: snapToProto(snap), Entries: make([]*agentdv1.SnapshotEntry, len(entries))}
	for i := range entries {
		resp.Entries[i] = snapEntryToProto(&entries[i])
	}
	return resp, nil
}

// Diff compares two snapshots, or one with the live tree at its root.
func (h *snapshotService) Diff(ctx context.Context, req *agentdv1.DiffRequest) (*agentdv1.DiffResponse, error) {
	changes, err := h.store.Diff(ctx, req.GetFromId(), req.GetToId())
	if err != nil {
		return nil, err
	}
	resp := &agentdv1.DiffResponse{Changes: make([]*agentdv1.DiffEntry, len(changes))}
	for i, c := range changes {
		d := &agentdv1.DiffEntry{Path: snapUTF8(c.Path), Kind: snapChangeKind(c.Kind)}
		if c.From != nil {
			d.From = snapEntryToProto(c.From)
		}
		if c.To != nil {
			d.To = snapEntryToProto(c.To)
		}
		resp.Changes[i] = d
	}
	return resp, nil
}

// Restore writes a snapshot back, streaming progress, then a summary.
func (h *snapshotService) Restore(req *agentdv1.RestoreRequest, stream agentdv1.SnapshotService_RestoreServer) error {
	ctx := stream.Context()
	target := ""
	if req.GetTarget() != "" {
		var err error
		if target, err = h.resolve(req.GetTarget(), "target"); err != nil {
			return err
		}
	}
	send := func(p *agentdv1.Progress) error {
		return stream.Send(&agentdv1.RestoreResponse{Event: &agentdv1.RestoreResponse_Progress{Progress: p}})
	}
	progress, flush := snapThrottle(send)
	start := time.Now()
	sum, err := h.store.Restore(ctx, req.GetId(), target, req.GetDeleteExtra(), progress)
	rec := activity.Record{Kind: wire.KindSnapshotRestore, Path: target, ObjectID: req.GetId(), Duration: time.Since(start)}
	if err != nil {
		rec.Summary, rec.Outcome, rec.Error = "restore of "+req.GetId()+" failed", activity.Failed, err.Error()
		h.s.record(ctx, rec)
		return err
	}
	rec.Path = sum.Target
	rec.Summary = fmt.Sprintf("restored %s into %s: %d written, %d unchanged", req.GetId(), sum.Target, sum.FilesWritten, sum.FilesUnchanged)
	if req.GetDeleteExtra() {
		rec.Summary += fmt.Sprintf(", %d removed", sum.PathsRemoved)
	}
	rec.Outcome = activity.OK
	h.s.record(ctx, rec)
	flush()
	return stream.Send(&agentdv1.RestoreResponse{Event: &agentdv1.RestoreResponse_Summary{Summary: &agentdv1.RestoreSummary{
		FilesWritten:   sum.FilesWritten,
		FilesUnchanged: sum.FilesUnchanged,
		PathsRemoved:   sum.PathsRemoved,
		Target:         snapUTF8(sum.Target),
	}}})
}

// snapChunkSender is an io.Writer that sends what it is given in messages of
// at most snapExportChunk bytes.
type snapChunkSender struct {
	send func([]byte) error
	n    int64
}

func (c *snapChunkSender) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		k := min(len(p), snapExportChunk)
		if err := c.send(p[:k]); err != nil {
			return written, err
		}
		written += k
		c.n += int64(k)
		p = p[k:]
	}
	return written, nil
}

// Export streams a snapshot as a tar archive.
func (h *snapshotService) Export(req *agentdv1.ExportRequest, stream agentdv1.SnapshotService_ExportServer) error {
	ctx := stream.Context()
	cs := &snapChunkSender{send: func(b []byte) error { return stream.Send(&agentdv1.ExportResponse{Data: b}) }}
	bw := bufio.NewWriterSize(cs, snapExportChunk)
	start := time.Now()
	err := h.store.Export(ctx, req.GetId(), bw)
	if err == nil {
		err = bw.Flush()
	}
	rec := activity.Record{Kind: wire.KindSnapshotExport, ObjectID: req.GetId(), Bytes: cs.n, Duration: time.Since(start)}
	if err != nil {
		rec.Summary, rec.Outcome, rec.Error = "export of "+req.GetId()+" failed", activity.Failed, err.Error()
		h.s.record(ctx, rec)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	rec.Summary, rec.Outcome = fmt.Sprintf("exported %s as a tar of %s", req.GetId(), units.Bytes(cs.n)), activity.OK
	h.s.record(ctx, rec)
	return nil
}

// snapImportReader reads the tar bytes of an Import stream after its header.
type snapImportReader struct {
	stream agentdv1.SnapshotService_ImportServer
	buf    []byte
	err    error
	n      int64
}

func (r *snapImportReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		m, err := r.stream.Recv()
		switch {
		case err != nil:
			r.err = err // io.EOF at the end
		case m.GetHeader() != nil:
			r.err = invalidf("a second header in the Import stream: send the header first, then only data")
		default:
			r.buf = m.GetData()
		}
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	r.n += int64(n)
	return n, nil
}

// Import stores a tar archive as a new snapshot.
func (h *snapshotService) Import(stream agentdv1.SnapshotService_ImportServer) error {
	ctx := stream.Context()
	first, err := stream.Recv()
	if err == io.EOF {
		return invalidf("empty Import stream: send an ImportHeader first, then the tar bytes")
	}
	if err != nil {
		return err
	}
	hdr := first.GetHeader()
	if hdr == nil {
		return invalidf("the first Import message must be the header (label, root), then the tar bytes")
	}
	root, err := h.resolve(hdr.GetRoot(), "root")
	if err != nil {
		return err
	}
	r := &snapImportReader{stream: stream}
	start := time.Now()
	snap, err := h.store.Import(ctx, r, hdr.GetLabel(), root)
	rec := activity.Record{Kind: wire.KindSnapshotImport, Path: root, Bytes: r.n, Duration: time.Since(start)}
	if err != nil {
		rec.Summary, rec.Outcome, rec.Error = "import of a tar archive failed", activity.Failed, err.Error()
		h.s.record(ctx, rec)
		return err
	}
	rec.Summary = fmt.Sprintf("imported a tar archive as %s: %d files, %s", snap.ID, snap.Files, units.Bytes(snap.TotalBytes))
	rec.Outcome, rec.ObjectID = activity.OK, snap.ID
	h.s.record(ctx, rec)
	return stream.SendAndClose(&agentdv1.ImportResponse{Snapshot: snapToProto(snap)})
}

// Delete removes a snapshot and the blobs no other snapshot uses.
func (h *snapshotService) Delete(ctx context.Context, req *agentdv1.DeleteRequest) (*agentdv1.DeleteResponse, error) {
	freed, err := h.store.Delete(ctx, req.GetId())
	rec := activity.Record{Kind: wire.KindSnapshotDelete, ObjectID: req.GetId(), Bytes: freed}
	if err != nil {
		rec.Summary, rec.Outcome, rec.Error = "delete of snapshot "+req.GetId()+" failed", activity.Failed, err.Error()
		h.s.record(ctx, rec)
		return nil, err
	}
	rec.Summary, rec.Outcome = fmt.Sprintf("deleted snapshot %s, freed %s", req.GetId(), units.Bytes(freed)), activity.OK
	h.s.record(ctx, rec)
	return &agentdv1.DeleteResponse{FreedBytes: freed}, nil
}

func snapProgressToProto(p snapshot.Progress) *agentdv1.Progress {
	return &agentdv1.Progress{FilesDone: p.FilesDone, FilesTotal: p.FilesTotal, BytesDone: p.BytesDone, BytesTotal: p.BytesTotal}
}

// snapshotToProto converts a snapshot. Skipped paths carry their reason,
// "path (reason)", and a last "… and N more" when the list was cut.
func snapToProto(s *snapshot.Snapshot) *agentdv1.Snapshot {
	p := &agentdv1.Snapshot{
		Id:          s.ID,
		Label:       s.Label,
		Root:        snapUTF8(s.Root),
		Created:     timestamppb.New(s.Created),
		Files:       s.Files,
		Directories: s.Dirs,
		Symlinks:    s.Symlinks,
		TotalBytes:  s.TotalBytes,
		StoredBytes: s.StoredBytes,
	}
	for _, sk := range s.Skipped {
		p.Skipped = append(p.Skipped, snapUTF8(sk.Path)+" ("+sk.Reason+")")
	}
	if s.SkippedMore > 0 {
		p.Skipped = append(p.Skipped, fmt.Sprintf("… and %d more", s.SkippedMore))
	}
	return p
}

func snapEntryToProto(e *snapshot.Entry) *agentdv1.SnapshotEntry {
	p := &agentdv1.SnapshotEntry{
		Path:          snapUTF8(e.Path),
		Mode:          e.Mode,
		Size:          e.Size,
		Sha256:        e.SHA256,
		SymlinkTarget: snapUTF8(e.Target),
	}
	if !e.ModTime.IsZero() {
		p.Modified = timestamppb.New(e.ModTime)
	}
	switch e.Type {
	case snapshot.TypeFile:
		p.Type = agentdv1.FileType_FILE_TYPE_FILE
	case snapshot.TypeDir:
		p.Type = agentdv1.FileType_FILE_TYPE_DIRECTORY
	case snapshot.TypeSymlink:
		p.Type = agentdv1.FileType_FILE_TYPE_SYMLINK
	}
	return p
}

func snapChangeKind(k snapshot.ChangeKind) agentdv1.ChangeKind {
	switch k {
	case snapshot.Added:
		return agentdv1.ChangeKind_CHANGE_KIND_ADDED
	case snapshot.Removed:
		return agentdv1.ChangeKind_CHANGE_KIND_REMOVED
	case snapshot.Modified:
		return agentdv1.ChangeKind_CHANGE_KIND_MODIFIED
	case snapshot.TypeChanged:
		return agentdv1.ChangeKind_CHANGE_KIND_TYPE_CHANGED
	}
	return agentdv1.ChangeKind_CHANGE_KIND_UNSPECIFIED
}

// validUTF8 makes a file name fit a proto string: bytes that are not
// UTF-8 become U+FFFD.
func snapUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
