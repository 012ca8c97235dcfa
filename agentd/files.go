package agentd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/devdepot-ai/agentd/internal/activity"
	"github.com/devdepot-ai/agentd/internal/files"
	"github.com/devdepot-ai/agentd/internal/wire"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// fileService serves agentdv1.FileService: it converts requests to calls
// of package files, results back to messages, and records every operation
// in the activity log.
type fileService struct {
	agentdv1.UnimplementedFileServiceServer
	s  *Server
	fs *files.FS
}

var _ agentdv1.FileServiceServer = (*fileService)(nil)

func newFileService(_ context.Context, s *Server) (*fileService, error) {
	fsys, err := files.New(files.Options{Workspace: s.opts.Workspace})
	if err != nil {
		return nil, err
	}
	return &fileService{s: s, fs: fsys}, nil
}

// responseBudget bounds the size of one List or Glob response, below the
// 4 MiB a gRPC client accepts by default; past it the list is cut and
// marked truncated.
const responseBudget = 3 << 20

// Stat describes one path.
func (fsvc *fileService) Stat(ctx context.Context, req *agentdv1.StatRequest) (*agentdv1.StatResponse, error) {
	e, err := fsvc.fs.Stat(ctx, req.GetPath())
	fsvc.record(ctx, wire.KindFilesStat, "stat "+pathOr(e.Path, req.GetPath()), e.Path, 0, nil, err)
	if err != nil {
		return nil, err
	}
	return &agentdv1.StatResponse{Info: fileInfoToProto(e)}, nil
}

// List lists a directory.
func (fsvc *fileService) List(ctx context.Context, req *agentdv1.FileServiceListRequest) (*agentdv1.FileServiceListResponse, error) {
	res, err := fsvc.fs.List(ctx, req.GetPath(), files.ListOptions{
		Depth:      int(req.GetDepth()),
		Hidden:     req.GetHidden(),
		MaxEntries: int(req.GetMaxEntries()),
	})
	where := fsvc.resolved(req.GetPath())
	fsvc.record(ctx, wire.KindFilesList, fmt.Sprintf("listed %s (%d entries)", where, len(res.Entries)), where, 0, nil, err)
	if err != nil {
		return nil, err
	}
	resp := &agentdv1.FileServiceListResponse{Truncated: res.Truncated}
	size := 0
	for _, e := range res.Entries {
		info := fileInfoToProto(e)
		if size += len(e.Path) + len(e.Name) + len(e.Target) + 64; size > responseBudget {
			resp.Truncated = true
			break
		}
		resp.Entries = append(resp.Entries, info)
	}
	return resp, nil
}

// MakeDir creates a directory.
func (fsvc *fileService) MakeDir(ctx context.Context, req *agentdv1.MakeDirRequest) (*agentdv1.MakeDirResponse, error) {
	mode, err := modeFromProto("mode", req.GetMode())
	if err != nil {
		return nil, err
	}
	e, err := fsvc.fs.MakeDir(ctx, req.GetPath(), req.GetParents(), mode)
	fsvc.record(ctx, wire.KindFilesMkdir, "created directory "+pathOr(e.Path, req.GetPath()), e.Path, 0, nil, err)
	if err != nil {
		return nil, err
	}
	return &agentdv1.MakeDirResponse{Info: fileInfoToProto(e)}, nil
}

// Move renames a file or directory.
func (fsvc *fileService) Move(ctx context.Context, req *agentdv1.MoveRequest) (*agentdv1.MoveResponse, error) {
	e, err := fsvc.fs.Move(ctx, req.GetSource(), req.GetDestination(), req.GetOverwrite())
	fsvc.record(ctx, wire.KindFilesMove, fmt.Sprintf("moved %s to %s", req.GetSource(), pathOr(e.Path, req.GetDestination())), e.Path, 0, nil, err)
	if err != nil {
		return nil, err
	}
	return &agentdv1.MoveResponse{Info: fileInfoToProto(e)}, nil
}

// Remove deletes a path.
func (fsvc *fileService) Remove(ctx context.Context, req *agentdv1.RemoveRequest) (*agentdv1.RemoveResponse, error) {
	err := fsvc.fs.Remove(ctx, req.GetPath(), req.GetRecursive())
	what := "removed "
	if req.GetRecursive() {
		what = "removed recursively "
	}
	where := fsvc.resolved(req.GetPath())
	fsvc.record(ctx, wire.KindFilesRemove, what+where, where, 0, nil, err)
	if err != nil {
		return nil, err
	}
	return &agentdv1.RemoveResponse{}, nil
}

// Read streams a byte range of a file; the first message carries the
// file's description.
func (fsvc *fileService) Read(req *agentdv1.ReadRequest, stream agentdv1.FileService_ReadServer) error {
	ctx := stream.Context()
	var n int64
	path := req.GetPath()
	err := fsvc.fs.Read(ctx, req.GetPath(), req.GetOffset(), req.GetLimit(), func(c files.ReadChunk) error {
		// No copy of c.Data: Send marshals the message before it returns,
		// and this server installs no stats handler that would keep it.
		msg := &agentdv1.ReadResponse{Offset: c.Offset, Data: c.Data}
		if c.Info != nil {
			msg.Info = fileInfoToProto(*c.Info)
			path = c.Info.Path
		}
		n += int64(len(c.Data))
		return stream.Send(msg)
	})
	fsvc.record(ctx, wire.KindFilesRead, fmt.Sprintf("read %d bytes of %s", n, path), path, n, nil, err)
	return err
}

// ReadLines returns a range of lines of a text file.
func (fsvc *fileService) ReadLines(ctx context.Context, req *agentdv1.ReadLinesRequest) (*agentdv1.ReadLinesResponse, error) {
	res, err := fsvc.fs.ReadLines(ctx, req.GetPath(), files.LinesOptions{
		From:       req.GetFromLine(),
		Count:      req.GetCount(),
		MaxLineLen: int(req.GetMaxLineLength()),
	})
	summary := fmt.Sprintf("read lines %d-%d of %s", res.From, res.From+int64(len(res.Lines))-1, pathOr(res.Path, req.GetPath()))
	if err != nil {
		summary = fmt.Sprintf("read lines from %d of %s", max(req.GetFromLine(), 1), req.GetPath())
	}
	fsvc.record(ctx, wire.KindFilesReadLines, summary, res.Path, 0, nil, err)
	if err != nil {
		return nil, err
	}
	return &agentdv1.ReadLinesResponse{
		Lines:      res.Lines,
		FromLine:   res.From,
		TotalLines: res.Total,
		More:       res.More,
		CutLines:   res.Cut,
		Size:       res.Size,
		Sha256:     res.SHA256,
	}, nil
}

// Write replaces or appends to a file from a client stream: the header,
// then the content. Nothing changes unless the stream ends cleanly.
func (fsvc *fileService) Write(stream agentdv1.FileService_WriteServer) error {
	ctx := stream.Context()
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return invalidf("empty Write stream: send the header (path, …) as the first message, then the content")
	}
	if err != nil {
		return err
	}
	hdr := first.GetHeader()
	if hdr == nil {
		return invalidf("the first message of a Write stream must be the header (path, mode, …), not data")
	}
	mode, err := modeFromProto("mode", hdr.GetMode())
	if err != nil {
		return err
	}
	if name, ok := fsvc.s.secrets.name(hdr.GetPath()); ok {
		return fsvc.writeSecret(stream, name, hdr)
	}
	res, err := fsvc.fs.Write(ctx, hdr.GetPath(), files.WriteOptions{
		Mode:           mode,
		CreateParents:  hdr.GetCreateParents(),
		Append:         hdr.GetAppend(),
		ExpectedSHA256: hdr.GetExpectedSha256(),
	}, &writeStreamReader{stream: stream})
	what := "wrote"
	if hdr.GetAppend() {
		what = "appended to"
	}
	fsvc.record(ctx, wire.KindFilesWrite, fmt.Sprintf("%s %s (%d bytes)", what, pathOr(res.Path, hdr.GetPath()), res.Size), res.Path, res.Size, nil, err)
	if err != nil {
		return err
	}
	return stream.SendAndClose(&agentdv1.WriteResponse{
		Path:    protoPath(res.Path),
		Size:    res.Size,
		Sha256:  res.SHA256,
		Created: res.Created,
	})
}

// writeSecret keeps a write into the secrets directory in the daemon's
// memory (see secretStore): nothing reaches the disk, and the activity log
// names the variable, never its value.
func (fsvc *fileService) writeSecret(stream agentdv1.FileService_WriteServer, name string, hdr *agentdv1.WriteHeader) error {
	ctx := stream.Context()
	if hdr.GetAppend() || len(hdr.GetExpectedSha256()) > 0 {
		return invalidf("secret %s: a delivered variable is written whole, without append or expected_sha256", name)
	}
	value, err := io.ReadAll(io.LimitReader(&writeStreamReader{stream: stream}, wire.MaxSecretBytes+1))
	if err == nil {
		err = fsvc.s.secrets.set(name, value)
	}
	fsvc.record(ctx, wire.KindFilesWrite, "set secret variable "+name+" for later commands", hdr.GetPath(), int64(len(value)), nil, err)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(value)
	return stream.SendAndClose(&agentdv1.WriteResponse{Path: protoPath(hdr.GetPath()), Size: int64(len(value)), Sha256: hex.EncodeToString(sum[:]), Created: true})
}

// writeStreamReader reads the data messages of a Write stream.
type writeStreamReader struct {
	stream agentdv1.FileService_WriteServer
	buf    []byte
}

var _ files.ChunkReader = (*writeStreamReader)(nil)

// ReadChunk returns the next message's data, which no one else holds (each
// received message is a new one).
func (r *writeStreamReader) ReadChunk() ([]byte, error) {
	if len(r.buf) > 0 {
		b := r.buf
		r.buf = nil
		return b, nil
	}
	for {
		msg, err := r.stream.Recv()
		if err != nil {
			return nil, err
		}
		if msg.GetHeader() != nil {
			return nil, invalidf("a second header in a Write stream: send the header once, then only data")
		}
		if b := msg.GetData(); len(b) > 0 {
			return b, nil
		}
	}
}

func (r *writeStreamReader) Read(p []byte) (int, error) {
	if len(r.buf) == 0 {
		b, err := r.ReadChunk()
		if err != nil {
			return 0, err
		}
		r.buf = b
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// Edit applies exact string replacements to a text file.
func (fsvc *fileService) Edit(ctx context.Context, req *agentdv1.EditRequest) (*agentdv1.EditResponse, error) {
	edits := make([]files.Replacement, len(req.GetEdits()))
	for i, e := range req.GetEdits() {
		edits[i] = files.Replacement{Old: e.GetOldString(), New: e.GetNewString(), ReplaceAll: e.GetReplaceAll()}
	}
	res, err := fsvc.fs.Edit(ctx, req.GetPath(), edits, files.EditOptions{
		ExpectedSHA256: req.GetExpectedSha256(),
		DryRun:         req.GetDryRun(),
	})
	what := "edited"
	if req.GetDryRun() {
		what = "previewed an edit of"
	}
	fsvc.record(ctx, wire.KindFilesEdit, fmt.Sprintf("%s %s (%d replacements)", what, pathOr(res.Path, req.GetPath()), res.Replacements),
		res.Path, 0, []byte(res.Diff), err)
	if err != nil {
		return nil, err
	}
	return &agentdv1.EditResponse{
		Replacements: int32(res.Replacements),
		Diff:         strings.ToValidUTF8(res.Diff, "\uFFFD"),
		Sha256:       res.SHA256,
		Path:         protoPath(res.Path),
	}, nil
}

// Search streams the lines matching a pattern, then a summary.
func (fsvc *fileService) Search(req *agentdv1.SearchRequest, stream agentdv1.FileService_SearchServer) error {
	ctx := stream.Context()
	sum, err := fsvc.fs.Search(ctx, files.SearchOptions{
		Pattern:    req.GetPattern(),
		Path:       req.GetPath(),
		Fixed:      req.GetFixedString(),
		IgnoreCase: req.GetIgnoreCase(),
		Include:    req.GetInclude(),
		Exclude:    req.GetExclude(),
		Context:    int(req.GetContextLines()),
		MaxMatches: int(req.GetMaxMatches()),
		Hidden:     req.GetHidden(),
		NoIgnore:   req.GetNoIgnore(),
		Binary:     req.GetBinary(),
	}, func(m files.Match) error {
		return stream.Send(&agentdv1.SearchResponse{Result: &agentdv1.SearchResponse_Match{Match: &agentdv1.SearchMatch{
			Path:       protoPath(m.Path),
			LineNumber: m.Line,
			Line:       m.Text,
			Before:     m.Before,
			After:      m.After,
		}}})
	})
	where := fsvc.fs.Workspace()
	if req.GetPath() != "" {
		where = fsvc.resolved(req.GetPath())
	}
	fsvc.record(ctx, wire.KindFilesSearch, fmt.Sprintf("searched for %q in %s: %d matches in %d files", shortText(req.GetPattern(), 100), where, sum.Matches, sum.FilesScanned),
		where, 0, nil, err)
	if err != nil {
		return err
	}
	return stream.Send(&agentdv1.SearchResponse{Result: &agentdv1.SearchResponse_Summary{Summary: &agentdv1.SearchSummary{
		FilesScanned: sum.FilesScanned,
		Matches:      sum.Matches,
		Truncated:    sum.Truncated,
		FilesSkipped: sum.FilesSkipped,
	}}})
}

// WatchFiles streams the changes below a directory until the caller ends
// the call: the ready message, then batches (and overflows).
func (fsvc *fileService) WatchFiles(req *agentdv1.WatchFilesRequest, stream agentdv1.FileService_WatchFilesServer) error {
	ctx := stream.Context()
	var changes, batches, overflows int64
	err := fsvc.fs.Watch(ctx, files.WatchOptions{
		Path:     req.GetPath(),
		Hidden:   req.GetHidden(),
		NoIgnore: req.GetNoIgnore(),
		Coalesce: req.GetCoalesce().AsDuration(),
	}, func(root string, dirs int) error {
		return stream.Send(&agentdv1.WatchFilesResponse{Result: &agentdv1.WatchFilesResponse_Ready{Ready: &agentdv1.WatchFilesReady{
			Path: protoPath(root), Directories: int64(dirs),
		}}})
	}, func(b files.WatchBatch) error {
		if b.Overflow != "" {
			overflows++
			return stream.Send(&agentdv1.WatchFilesResponse{Result: &agentdv1.WatchFilesResponse_Overflow{Overflow: &agentdv1.WatchFilesOverflow{Reason: b.Overflow}}})
		}
		batches++
		changes += int64(len(b.Events))
		evs := make([]*agentdv1.FileEvent, len(b.Events))
		for i, e := range b.Events {
			evs[i] = &agentdv1.FileEvent{Path: protoPath(e.Path), Kind: watchOpToProto(e.Op), Directory: e.Dir}
		}
		return stream.Send(&agentdv1.WatchFilesResponse{Result: &agentdv1.WatchFilesResponse_Batch{Batch: &agentdv1.FileEventBatch{Events: evs}}})
	})
	where := fsvc.fs.Workspace()
	if req.GetPath() != "" {
		where = fsvc.resolved(req.GetPath())
	}
	summary := fmt.Sprintf("watched %s: %d changes in %d batches", where, changes, batches)
	if overflows > 0 {
		summary += fmt.Sprintf(", %d overflows", overflows)
	}
	fsvc.record(ctx, wire.KindFilesWatch, summary, where, 0, nil, err)
	return err
}

// watchOpToProto converts a change's kind.
func watchOpToProto(op files.WatchOp) agentdv1.FileEventKind {
	switch op {
	case files.WatchCreated:
		return agentdv1.FileEventKind_FILE_EVENT_KIND_CREATED
	case files.WatchWritten:
		return agentdv1.FileEventKind_FILE_EVENT_KIND_WRITTEN
	case files.WatchRemoved:
		return agentdv1.FileEventKind_FILE_EVENT_KIND_REMOVED
	case files.WatchRenamed:
		return agentdv1.FileEventKind_FILE_EVENT_KIND_RENAMED
	case files.WatchAttributes:
		return agentdv1.FileEventKind_FILE_EVENT_KIND_ATTRIBUTES
	}
	return agentdv1.FileEventKind_FILE_EVENT_KIND_UNSPECIFIED
}

// Glob lists the paths matching a pattern.
func (fsvc *fileService) Glob(ctx context.Context, req *agentdv1.GlobRequest) (*agentdv1.GlobResponse, error) {
	res, err := fsvc.fs.Glob(ctx, files.GlobOptions{
		Pattern:    req.GetPattern(),
		Path:       req.GetPath(),
		NoIgnore:   req.GetNoIgnore(),
		Hidden:     req.GetHidden(),
		MaxResults: int(req.GetMaxResults()),
	})
	where := fsvc.fs.Workspace()
	if req.GetPath() != "" {
		where = fsvc.resolved(req.GetPath())
	}
	fsvc.record(ctx, wire.KindFilesGlob, fmt.Sprintf("globbed %q in %s: %d paths", shortText(req.GetPattern(), 100), where, len(res.Paths)), where, 0, nil, err)
	if err != nil {
		return nil, err
	}
	resp := &agentdv1.GlobResponse{Paths: make([]string, 0, len(res.Paths)), Truncated: res.Truncated}
	size := 0
	for _, p := range res.Paths {
		if size += len(p) + 8; size > responseBudget {
			resp.Truncated = true
			break
		}
		resp.Paths = append(resp.Paths, protoPath(p))
	}
	return resp, nil
}

// record adds a file operation to the activity log.
func (fsvc *fileService) record(ctx context.Context, kind, summary, path string, n int64, output []byte, err error) {
	r := activity.Record{Kind: kind, Summary: summary, Path: path, Bytes: n, Output: output, Outcome: activity.OK}
	if err != nil {
		r.Outcome, r.Error = activity.Failed, err.Error()
	}
	fsvc.s.record(ctx, r)
}

// fileInfoToProto converts an Entry. Paths that are not valid UTF-8 (a
// proto string must be) get U+FFFD in path and their exact bytes in
// raw_path.
func fileInfoToProto(e files.Entry) *agentdv1.FileInfo {
	info := &agentdv1.FileInfo{
		Path:          protoPath(e.Path),
		Name:          protoPath(e.Name),
		Size:          e.Size,
		Mode:          modeToProto(e.Mode),
		Modified:      timestamppb.New(e.ModTime),
		SymlinkTarget: protoPath(e.Target),
		Uid:           e.UID,
		Gid:           e.GID,
	}
	if e.ModTime.IsZero() {
		info.Modified = nil
	}
	if !utf8.ValidString(e.Path) {
		info.RawPath = []byte(e.Path)
	}
	switch e.Type {
	case files.TypeFile:
		info.Type = agentdv1.FileType_FILE_TYPE_FILE
	case files.TypeDir:
		info.Type = agentdv1.FileType_FILE_TYPE_DIRECTORY
	case files.TypeSymlink:
		info.Type = agentdv1.FileType_FILE_TYPE_SYMLINK
	default:
		info.Type = agentdv1.FileType_FILE_TYPE_OTHER
	}
	return info
}

// protoPath makes a path fit a proto string field.
func protoPath(p string) string { return strings.ToValidUTF8(p, "\uFFFD") }

// Unix mode bits above the permissions, as chmod takes them.
const (
	unixSetuid = 0o4000
	unixSetgid = 0o2000
	unixSticky = 0o1000
)

// modeToProto turns a mode into chmod's bits: 0755, 04755, …
func modeToProto(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= unixSetuid
	}
	if m&fs.ModeSetgid != 0 {
		u |= unixSetgid
	}
	if m&fs.ModeSticky != 0 {
		u |= unixSticky
	}
	return u
}

// modeFromProto turns chmod's bits into a mode, rejecting anything else.
func modeFromProto(field string, u uint32) (fs.FileMode, error) {
	if u&^0o7777 != 0 {
		return 0, invalidf("%s %#o is not a permission mode: give bits within 07777, e.g. 0644", field, u)
	}
	m := fs.FileMode(u & 0o777)
	if u&unixSetuid != 0 {
		m |= fs.ModeSetuid
	}
	if u&unixSetgid != 0 {
		m |= fs.ModeSetgid
	}
	if u&unixSticky != 0 {
		m |= fs.ModeSticky
	}
	return m, nil
}

// resolved is path made absolute for the activity log, or path as given
// when it is not a valid path.
func (fsvc *fileService) resolved(path string) string {
	if p, err := fsvc.fs.Resolve(path); err == nil {
		return p
	}
	return path
}

// pathOr returns the resolved path when there is one, else what was asked.
func pathOr(resolved, asked string) string {
	if resolved != "" {
		return resolved
	}
	return asked
}

// shortText cuts s to n bytes for a summary line.
func shortText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
