package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

const pythonDoc = `Run Python code in a persistent interpreter session on the agentd machine: variables, imports and
functions stay for the next call with the same session (default "default"). The value of a final expression is
returned like in a notebook, with printed output; an exception returns its traceback.`

const snapCreateDoc = `Snapshot a directory (default the workspace): a content-addressed copy to compare against
(snapshot_diff) or go back to (snapshot_restore) later. Take one before a risky change. Returns its id.`

const snapRestoreDoc = `Restore a snapshot by id into its directory (or target): files it has are written back; with
delete_extra, files it does not have are removed.`

const snapDiffDoc = `List what changed between two snapshots, or between a snapshot and its directory as it is now
(leave to_id empty): added (+), removed (-), modified (M), type changed (T), with sizes.`

const infoDoc = `Describe the agentd machine or sandbox: OS, user, home, workspace (where relative paths point),
shell, CPUs, memory, free disk, Python version.`

// PythonInput is python's arguments.
type PythonInput struct {
	Code           string  `json:"code" jsonschema:"Python source to run"`
	Session        string  `json:"session,omitempty" jsonschema:"interpreter session to run in; its state persists between calls (default \"default\")"`
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty" jsonschema:"interrupt the code after this many seconds (default the daemon's)"`
}

// PythonResult is python's structured result.
type PythonResult struct {
	Result    string `json:"result,omitempty" jsonschema:"repr of the final expression's value"`
	Error     string `json:"error,omitempty" jsonschema:"the exception, Name: value"`
	TimedOut  bool   `json:"timed_out,omitempty"`
	CutBytes  int64  `json:"cut_bytes,omitempty" jsonschema:"bytes cut from the middle of the output shown"`
	SessionOK bool   `json:"session_alive" jsonschema:"the session kept its state (false: it was restarted)"`
}

func (s *Server) python(ctx context.Context, req *mcp.CallToolRequest, in PythonInput) (*mcp.CallToolResult, PythonResult, error) {
	if in.TimeoutSeconds < 0 {
		return nil, PythonResult{}, errors.New("timeout_seconds must not be negative")
	}
	session := in.Session
	if session == "" {
		session = "default"
	}
	r := &agentdv1.RunRequest{Code: in.Code, Session: session}
	if in.TimeoutSeconds > 0 {
		r.Timeout = durationpb.New(time.Duration(in.TimeoutSeconds * float64(time.Second)))
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := agentdv1.NewPythonServiceClient(s.conn).Run(rctx, r)
	if err != nil {
		return nil, PythonResult{}, err
	}
	out := newClip(headBytes, tailBytes)
	prog := newProgress(ctx, req)
	var res PythonResult
	var tb string
	for {
		m, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, PythonResult{}, err
		}
		switch {
		case m.GetOutput() != nil:
			out.write(m.GetOutput().GetData())
			prog.send(m.GetOutput().GetData(), out.total)
		case m.GetResult() != nil:
			res.Result = m.GetResult().GetRepr()
		case m.GetError() != nil:
			e := m.GetError()
			res.Error, tb = e.GetName()+": "+e.GetValue(), e.GetTraceback()
		case m.GetDone() != nil:
			res.TimedOut, res.SessionOK = m.GetDone().GetTimedOut(), m.GetDone().GetSessionAlive()
		}
	}
	prog.flush()
	res.CutBytes = out.cut()
	var b strings.Builder
	b.WriteString(out.String())
	if res.Result != "" {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteString("\n")
		}
		b.WriteString(res.Result + "\n")
	}
	if tb != "" {
		b.WriteString(tb)
		if !strings.HasSuffix(tb, "\n") {
			b.WriteString("\n")
		}
	} else if res.Error != "" {
		b.WriteString(res.Error + "\n")
	}
	if res.TimedOut {
		b.WriteString("[timed out: the code was interrupted]\n")
	}
	if !res.SessionOK {
		fmt.Fprintf(&b, "[session %q was restarted: its variables are gone]\n", session)
	}
	if b.Len() == 0 {
		b.WriteString("[no output]\n")
	}
	// An exception is the code's outcome, like a command's exit code: the
	// call worked (isError is for calls that did not).
	return text(b.String()), res, nil
}

// SnapshotCreateInput is snapshot_create's arguments.
type SnapshotCreateInput struct {
	Root     string   `json:"root,omitempty" jsonschema:"directory to snapshot (default the workspace)"`
	Label    string   `json:"label,omitempty" jsonschema:"a note to tell snapshots apart, e.g. \"before refactor\""`
	Excludes []string `json:"excludes,omitempty" jsonschema:"globs of paths to leave out, e.g. [\"node_modules\",\"*.log\"]"`
}

// SnapshotResult is snapshot_create's structured result.
type SnapshotResult struct {
	ID    string `json:"id"`
	Root  string `json:"root"`
	Files int64  `json:"files"`
	Bytes int64  `json:"bytes"`
}

func (s *Server) snapshotCreate(ctx context.Context, _ *mcp.CallToolRequest, in SnapshotCreateInput) (*mcp.CallToolResult, SnapshotResult, error) {
	root := in.Root
	if root == "" {
		root = "."
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := agentdv1.NewSnapshotServiceClient(s.conn).Create(cctx, &agentdv1.CreateRequest{Root: root, Label: in.Label, Excludes: in.Excludes})
	if err != nil {
		return nil, SnapshotResult{}, err
	}
	var snap *agentdv1.Snapshot
	for {
		m, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, SnapshotResult{}, err
		}
		if m.GetSnapshot() != nil {
			snap = m.GetSnapshot()
		}
	}
	if snap == nil {
		return nil, SnapshotResult{}, errors.New("the daemon ended the snapshot without one")
	}
	res := SnapshotResult{ID: snap.GetId(), Root: snap.GetRoot(), Files: snap.GetFiles(), Bytes: snap.GetTotalBytes()}
	t := fmt.Sprintf("snapshot %s of %s: %d files, %d bytes", res.ID, res.Root, res.Files, res.Bytes)
	if sk := snap.GetSkipped(); len(sk) > 0 {
		t += fmt.Sprintf("; %d paths skipped (unreadable or special): %s", len(sk), strings.Join(sk[:min(len(sk), 10)], ", "))
	}
	return text(t), res, nil
}

// SnapshotRestoreInput is snapshot_restore's arguments.
type SnapshotRestoreInput struct {
	ID          string `json:"id" jsonschema:"the snapshot's id, from snapshot_create"`
	Target      string `json:"target,omitempty" jsonschema:"directory to restore into (default the snapshot's own)"`
	DeleteExtra bool   `json:"delete_extra,omitempty" jsonschema:"also remove files the snapshot does not have, making the directory exactly the snapshot"`
}

// RestoreResult is snapshot_restore's structured result.
type RestoreResult struct {
	Target    string `json:"target"`
	Written   int64  `json:"files_written"`
	Unchanged int64  `json:"files_unchanged"`
	Removed   int64  `json:"paths_removed"`
}

func (s *Server) snapshotRestore(ctx context.Context, _ *mcp.CallToolRequest, in SnapshotRestoreInput) (*mcp.CallToolResult, RestoreResult, error) {
	if in.ID == "" {
		return nil, RestoreResult{}, errors.New("id is empty: give a snapshot id from snapshot_create")
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := agentdv1.NewSnapshotServiceClient(s.conn).Restore(rctx, &agentdv1.RestoreRequest{Id: in.ID, Target: in.Target, DeleteExtra: in.DeleteExtra})
	if err != nil {
		return nil, RestoreResult{}, err
	}
	var sum *agentdv1.RestoreSummary
	for {
		m, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, RestoreResult{}, err
		}
		if m.GetSummary() != nil {
			sum = m.GetSummary()
		}
	}
	if sum == nil {
		return nil, RestoreResult{}, errors.New("the daemon ended the restore without a summary")
	}
	res := RestoreResult{Target: sum.GetTarget(), Written: sum.GetFilesWritten(), Unchanged: sum.GetFilesUnchanged(), Removed: sum.GetPathsRemoved()}
	return text(fmt.Sprintf("restored %s into %s: %d files written, %d unchanged, %d paths removed", in.ID, res.Target, res.Written, res.Unchanged, res.Removed)), res, nil
}

// SnapshotDiffInput is snapshot_diff's arguments.
type SnapshotDiffInput struct {
	FromID string `json:"from_id" jsonschema:"the older snapshot's id"`
	ToID   string `json:"to_id,omitempty" jsonschema:"the newer snapshot's id; empty: the directory as it is now"`
}

// DiffResult is snapshot_diff's structured result.
type DiffResult struct {
	Changes int `json:"changes"`
}

func (s *Server) snapshotDiff(ctx context.Context, _ *mcp.CallToolRequest, in SnapshotDiffInput) (*mcp.CallToolResult, DiffResult, error) {
	if in.FromID == "" {
		return nil, DiffResult{}, errors.New("from_id is empty: give a snapshot id from snapshot_create")
	}
	resp, err := agentdv1.NewSnapshotServiceClient(s.conn).Diff(ctx, &agentdv1.DiffRequest{FromId: in.FromID, ToId: in.ToID})
	if err != nil {
		return nil, DiffResult{}, err
	}
	var b strings.Builder
	for _, c := range resp.GetChanges() {
		if b.Len() > textLimit {
			fmt.Fprintf(&b, "[… %d changes in all]\n", len(resp.GetChanges()))
			break
		}
		switch c.GetKind() {
		case agentdv1.ChangeKind_CHANGE_KIND_ADDED:
			fmt.Fprintf(&b, "+ %s (%d bytes)\n", c.GetPath(), c.GetTo().GetSize())
		case agentdv1.ChangeKind_CHANGE_KIND_REMOVED:
			fmt.Fprintf(&b, "- %s\n", c.GetPath())
		case agentdv1.ChangeKind_CHANGE_KIND_MODIFIED:
			fmt.Fprintf(&b, "M %s (%d → %d bytes)\n", c.GetPath(), c.GetFrom().GetSize(), c.GetTo().GetSize())
		default:
			fmt.Fprintf(&b, "T %s\n", c.GetPath())
		}
	}
	if len(resp.GetChanges()) == 0 {
		b.WriteString("[no changes]\n")
	}
	return text(b.String()), DiffResult{Changes: len(resp.GetChanges())}, nil
}

// InfoInput is info's (empty) arguments.
type InfoInput struct{}

func (s *Server) info(ctx context.Context, _ *mcp.CallToolRequest, _ InfoInput) (*mcp.CallToolResult, any, error) {
	resp, err := agentdv1.NewSystemServiceClient(s.conn).Info(ctx, &agentdv1.InfoRequest{})
	if err != nil {
		return nil, nil, err
	}
	b, err := protojson.MarshalOptions{UseProtoNames: true, Multiline: true}.Marshal(resp)
	if err != nil {
		return nil, nil, err
	}
	return text(string(b)), nil, nil
}
