package agentd

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/internal/snapshot"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// snapTree fills dir with files of several modes, an empty directory and
// symlinks.
func snapTree(t *testing.T, dir string) {
	t.Helper()
	for _, f := range []struct {
		path, content string
		mode          fs.FileMode
	}{
		{"README.md", "# project\n", 0o644},
		{"bin/build.sh", "#!/bin/sh\ngo build ./...\n", 0o755},
		{"src/main.go", "package main\n\nfunc main() {}\n", 0o644},
		{"src/big.dat", strings.Repeat("0123456789abcdef", 200_000), 0o600}, // 3.2 MB: streamed, stored loose
		{".env", "TOKEN=x\n", 0o600},
	} {
		p := filepath.Join(dir, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f.content), f.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "empty", "nested"), 0o750); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"latest": "src/main.go", "src/loop": "../src", "dangling": "gone"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
}

type snapPathState struct {
	Kind   string
	Perm   fs.FileMode
	SHA256 string
	Target string
}

// snapDescribe maps every path below root to what it is.
func snapDescribe(t *testing.T, root string) map[string]snapPathState {
	t.Helper()
	out := map[string]snapPathState{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := snapPathState{Perm: fi.Mode().Perm()}
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			st.Kind, st.SHA256 = "file", hex.EncodeToString(sum[:])
		case fi.IsDir():
			st.Kind = "dir"
		default:
			st.Kind, st.Perm = "symlink", 0
			st.Target, _ = os.Readlink(p)
		}
		out[rel] = st
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// snapCreate runs Create and returns its progress messages and snapshot.
func snapCreate(t *testing.T, c agentdv1.SnapshotServiceClient, req *agentdv1.CreateRequest) ([]*agentdv1.Progress, *agentdv1.Snapshot, error) {
	t.Helper()
	st, err := c.Create(t.Context(), req)
	if err != nil {
		return nil, nil, err
	}
	var progress []*agentdv1.Progress
	var snap *agentdv1.Snapshot
	for {
		m, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return progress, nil, err
		}
		if snap != nil {
			t.Errorf("message after the snapshot: %v", m)
		}
		if p := m.GetProgress(); p != nil {
			progress = append(progress, p)
		}
		if s := m.GetSnapshot(); s != nil {
			snap = s
		}
	}
	if snap == nil {
		t.Fatal("Create ended without a snapshot")
	}
	return progress, snap, nil
}

func snapRestore(t *testing.T, c agentdv1.SnapshotServiceClient, req *agentdv1.RestoreRequest) (*agentdv1.RestoreSummary, error) {
	t.Helper()
	st, err := c.Restore(t.Context(), req)
	if err != nil {
		return nil, err
	}
	var sum *agentdv1.RestoreSummary
	for {
		m, err := st.Recv()
		if err == io.EOF {
			return sum, nil
		}
		if err != nil {
			return nil, err
		}
		if s := m.GetSummary(); s != nil {
			sum = s
		}
	}
}

func snapExport(t *testing.T, c agentdv1.SnapshotServiceClient, id string) ([]byte, error) {
	t.Helper()
	st, err := c.Export(t.Context(), &agentdv1.ExportRequest{Id: id})
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	for {
		m, err := st.Recv()
		if err == io.EOF {
			return b.Bytes(), nil
		}
		if err != nil {
			return nil, err
		}
		if len(m.GetData()) > 32<<10 || len(m.GetData()) == 0 {
			t.Errorf("export chunk of %d bytes", len(m.GetData()))
		}
		b.Write(m.GetData())
	}
}

func snapImport(t *testing.T, c agentdv1.SnapshotServiceClient, hdr *agentdv1.ImportHeader, archive []byte) (*agentdv1.Snapshot, error) {
	t.Helper()
	st, err := c.Import(t.Context())
	if err != nil {
		return nil, err
	}
	if hdr != nil {
		if err := st.Send(&agentdv1.ImportRequest{Msg: &agentdv1.ImportRequest_Header{Header: hdr}}); err != nil {
			_, err = st.CloseAndRecv()
			return nil, err
		}
	}
	for len(archive) > 0 {
		k := min(len(archive), 10_000)
		if err := st.Send(&agentdv1.ImportRequest{Msg: &agentdv1.ImportRequest_Data{Data: archive[:k]}}); err != nil {
			break // the server gave up: CloseAndRecv says why
		}
		archive = archive[k:]
	}
	resp, err := st.CloseAndRecv()
	if err != nil {
		return nil, err
	}
	return resp.GetSnapshot(), nil
}

func snapWantCode(t *testing.T, err error, code codes.Code, msg string) {
	t.Helper()
	if status.Code(err) != code || !strings.Contains(status.Convert(err).Message(), msg) {
		t.Errorf("err = %v; want %v saying %q", err, code, msg)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	c := agentdv1.NewSnapshotServiceClient(ts.Conn)
	proj := filepath.Join(ts.Options().Workspace, "proj")
	snapTree(t, proj)
	want := snapDescribe(t, proj)

	progress, snap, err := snapCreate(t, c, &agentdv1.CreateRequest{Root: "proj", Label: "before refactor", Excludes: []string{".env"}})
	if err != nil {
		t.Fatal(err)
	}
	delete(want, ".env")
	if snap.Root != proj || snap.Label != "before refactor" || snap.Files != 4 || snap.Directories != 4 || snap.Symlinks != 3 || snap.StoredBytes <= 0 {
		t.Errorf("snapshot = %v", snap)
	}
	if !strings.HasPrefix(snap.Id, "s-") {
		t.Errorf("id %q", snap.Id)
	}
	if len(progress) == 0 {
		t.Fatal("no progress messages")
	}
	if last := progress[len(progress)-1]; last.FilesDone != 4 || last.FilesTotal != 4 || last.BytesDone != snap.TotalBytes || last.BytesTotal != snap.TotalBytes {
		t.Errorf("last progress = %v", last)
	}

	// The agent breaks things.
	os.WriteFile(filepath.Join(proj, "src", "main.go"), []byte("package main // broken\n"), 0o644)
	os.Remove(filepath.Join(proj, "README.md"))
	os.RemoveAll(filepath.Join(proj, "empty"))
	os.Chmod(filepath.Join(proj, "bin", "build.sh"), 0o600)
	os.WriteFile(filepath.Join(proj, "junk.tmp"), []byte("junk"), 0o644)

	diff, err := c.Diff(t.Context(), &agentdv1.DiffRequest{FromId: snap.Id})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]agentdv1.ChangeKind{}
	for _, ch := range diff.GetChanges() {
		got[ch.GetPath()] = ch.GetKind()
		if ch.GetKind() == agentdv1.ChangeKind_CHANGE_KIND_MODIFIED && (ch.GetFrom() == nil || ch.GetTo() == nil) {
			t.Errorf("modified %s lacks a side: %v", ch.GetPath(), ch)
		}
	}
	wantDiff := map[string]agentdv1.ChangeKind{
		"README.md":    agentdv1.ChangeKind_CHANGE_KIND_REMOVED,
		"bin/build.sh": agentdv1.ChangeKind_CHANGE_KIND_MODIFIED,
		"empty":        agentdv1.ChangeKind_CHANGE_KIND_REMOVED,
		"empty/nested": agentdv1.ChangeKind_CHANGE_KIND_REMOVED,
		"junk.tmp":     agentdv1.ChangeKind_CHANGE_KIND_ADDED,
		"src/main.go":  agentdv1.ChangeKind_CHANGE_KIND_MODIFIED,
	}
	if d := cmp.Diff(got, wantDiff); d != "" {
		t.Errorf("diff (-got +want):\n%s", d)
	}

	sum, err := snapRestore(t, c, &agentdv1.RestoreRequest{Id: snap.Id, DeleteExtra: true})
	if err != nil {
		t.Fatal(err)
	}
	if sum.GetTarget() != proj || sum.GetFilesWritten() != 2 || sum.GetFilesUnchanged() != 5 || sum.GetPathsRemoved() != 1 {
		t.Errorf("summary = %v", sum)
	}
	got2 := snapDescribe(t, proj)
	if _, ok := got2[".env"]; !ok {
		t.Error("delete_extra removed the excluded .env")
	}
	delete(got2, ".env")
	if d := cmp.Diff(got2, want); d != "" {
		t.Errorf("restored tree (-got +want):\n%s", d)
	}

	// Into another (relative) target.
	sum, err = snapRestore(t, c, &agentdv1.RestoreRequest{Id: snap.Id, Target: "copy"})
	if err != nil {
		t.Fatal(err)
	}
	if sum.GetTarget() != filepath.Join(ts.Options().Workspace, "copy") || sum.GetFilesWritten() != 7 {
		t.Errorf("summary = %v", sum)
	}
	if d := cmp.Diff(snapDescribe(t, sum.GetTarget()), want); d != "" {
		t.Errorf("copy (-got +want):\n%s", d)
	}

	list, err := c.List(t.Context(), &agentdv1.SnapshotServiceListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetSnapshots()) != 1 || list.GetSnapshots()[0].GetId() != snap.Id {
		t.Errorf("List = %v", list)
	}
	get, err := c.Get(t.Context(), &agentdv1.GetRequest{Id: snap.Id})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range get.GetEntries() {
		paths = append(paths, e.GetPath())
		if e.GetPath() == "bin/build.sh" && (e.GetMode() != 0o755 || e.GetType() != agentdv1.FileType_FILE_TYPE_FILE || e.GetSha256() == "") {
			t.Errorf("entry %v", e)
		}
		if e.GetPath() == "latest" && (e.GetType() != agentdv1.FileType_FILE_TYPE_SYMLINK || e.GetSymlinkTarget() != "src/main.go") {
			t.Errorf("entry %v", e)
		}
	}
	wantPaths := []string{"README.md", "bin", "bin/build.sh", "dangling", "empty", "empty/nested", "latest", "src", "src/big.dat", "src/loop", "src/main.go"}
	if d := cmp.Diff(paths, wantPaths); d != "" {
		t.Errorf("manifest paths (-got +want):\n%s", d)
	}

	// Every operation is in the activity log.
	w, err := agentdv1.NewActivityServiceClient(ts.Conn).Watch(t.Context(), &agentdv1.WatchRequest{NoFollow: true})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for {
		m, err := w.Recv()
		if err != nil {
			break
		}
		if strings.HasPrefix(m.GetRecord().GetKind(), "snapshot.") {
			kinds = append(kinds, m.GetRecord().GetKind())
		}
	}
	if d := cmp.Diff(kinds, []string{"snapshot.create", "snapshot.restore", "snapshot.restore"}); d != "" {
		t.Errorf("activity (-got +want):\n%s", d)
	}
}

func TestSnapshotExportImport(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	c := agentdv1.NewSnapshotServiceClient(ts.Conn)
	proj := filepath.Join(ts.Options().Workspace, "proj")
	snapTree(t, proj)
	want := snapDescribe(t, proj)
	_, snap, err := snapCreate(t, c, &agentdv1.CreateRequest{Root: proj})
	if err != nil {
		t.Fatal(err)
	}
	archive, err := snapExport(t, c, snap.Id)
	if err != nil {
		t.Fatal(err)
	}
	if n := countTarEntries(t, archive); n != 12 {
		t.Errorf("archive has %d entries, want 12", n)
	}

	// Into a second daemon: what it restores equals the original.
	ts2 := newTestServer(t, Options{})
	c2 := agentdv1.NewSnapshotServiceClient(ts2.Conn)
	imported, err := snapImport(t, c2, &agentdv1.ImportHeader{Label: "from elsewhere", Root: "restored"}, archive)
	if err != nil {
		t.Fatal(err)
	}
	if imported.GetFiles() != snap.GetFiles() || imported.GetTotalBytes() != snap.GetTotalBytes() || imported.GetLabel() != "from elsewhere" ||
		imported.GetRoot() != filepath.Join(ts2.Options().Workspace, "restored") {
		t.Errorf("imported %v\nfrom %v", imported, snap)
	}
	sum, err := snapRestore(t, c2, &agentdv1.RestoreRequest{Id: imported.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(snapDescribe(t, sum.GetTarget()), want); d != "" {
		t.Errorf("restored import (-got +want):\n%s", d)
	}
	// And the archive it exports is the same archive.
	again, err := snapExport(t, c2, imported.GetId())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, archive) {
		t.Error("re-exported archive differs")
	}
}

func countTarEntries(t *testing.T, archive []byte) int {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(archive))
	n := 0
	for {
		_, err := tr.Next()
		if err == io.EOF {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
}

func TestSnapshotImportRefusesMaliciousTar(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	c := agentdv1.NewSnapshotServiceClient(ts.Conn)
	build := func(hdrs ...*tar.Header) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, h := range hdrs {
			if h.Typeflag == tar.TypeReg {
				h.Size = int64(len(h.Name))
			}
			h.Mode = 0o644
			if err := tw.WriteHeader(h); err != nil {
				t.Fatal(err)
			}
			if h.Typeflag == tar.TypeReg {
				tw.Write([]byte(h.Name))
			}
		}
		tw.Close()
		return b.Bytes()
	}
	ok := &tar.Header{Name: "fine.txt", Typeflag: tar.TypeReg}
	tests := []struct {
		name    string
		archive []byte
		msg     string
	}{
		{"dot-dot", build(ok, &tar.Header{Name: "../../.bashrc", Typeflag: tar.TypeReg}), "climbs out of the archive"},
		{"absolute", build(ok, &tar.Header{Name: "/etc/passwd", Typeflag: tar.TypeReg}), "absolute path"},
		{"symlink out and a file through it", build(ok,
			&tar.Header{Name: "out", Linkname: "/etc", Typeflag: tar.TypeSymlink},
			&tar.Header{Name: "out/cron.d/x", Typeflag: tar.TypeReg}), "which is a symlink"},
		{"symlink out", build(ok, &tar.Header{Name: "up", Linkname: "../..", Typeflag: tar.TypeSymlink}), "outside the archive"},
		{"hard link out", build(ok, &tar.Header{Name: "pw", Linkname: "../../etc/passwd", Typeflag: tar.TypeLink}), "outside the archive"},
		{"garbage", []byte(strings.Repeat("not a tar\n", 100)), "not a valid tar archive"},
	}
	for _, tt := range tests {
		_, err := snapImport(t, c, &agentdv1.ImportHeader{}, tt.archive)
		snapWantCode(t, err, codes.InvalidArgument, tt.msg)
	}
	_, err := snapImport(t, c, nil, build(ok))
	snapWantCode(t, err, codes.InvalidArgument, "first Import message must be the header")

	list, err := c.List(t.Context(), &agentdv1.SnapshotServiceListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetSnapshots()) != 0 {
		t.Errorf("refused imports left snapshots: %v", list)
	}
	for _, dir := range []string{"packs", "tmp", "manifests"} {
		names, _ := os.ReadDir(filepath.Join(ts.Options().StateDir, "snapshots", dir))
		if len(names) != 0 {
			t.Errorf("refused imports left %d files in %s", len(names), dir)
		}
	}
}

func TestSnapshotBadInput(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	c := agentdv1.NewSnapshotServiceClient(ts.Conn)
	ws := ts.Options().Workspace
	os.WriteFile(filepath.Join(ws, "file.txt"), []byte("x"), 0o644)

	_, _, err := snapCreate(t, c, &agentdv1.CreateRequest{Root: "no/such/dir"})
	snapWantCode(t, err, codes.NotFound, "does not exist")
	_, _, err = snapCreate(t, c, &agentdv1.CreateRequest{Root: "file.txt"})
	snapWantCode(t, err, codes.FailedPrecondition, "is a file, not a directory")
	_, _, err = snapCreate(t, c, &agentdv1.CreateRequest{Root: ws, Excludes: []string{"[z-a"}})
	snapWantCode(t, err, codes.InvalidArgument, "not a valid glob")
	_, _, err = snapCreate(t, c, &agentdv1.CreateRequest{Root: ws + "/x\x00y"})
	if status.Code(err) != codes.InvalidArgument && status.Code(err) != codes.Internal {
		t.Errorf("NUL in root: %v", err)
	}

	_, err = c.Get(t.Context(), &agentdv1.GetRequest{Id: "../../../etc/passwd"})
	snapWantCode(t, err, codes.InvalidArgument, "not a snapshot id")
	_, err = c.Get(t.Context(), &agentdv1.GetRequest{Id: "s-20200101-000000-0badc0de"})
	snapWantCode(t, err, codes.NotFound, "no snapshot s-20200101-000000-0badc0de")
	_, err = c.Delete(t.Context(), &agentdv1.DeleteRequest{Id: "s-20200101-000000-0badc0de"})
	snapWantCode(t, err, codes.NotFound, "no snapshot")
	_, err = c.Diff(t.Context(), &agentdv1.DiffRequest{})
	snapWantCode(t, err, codes.InvalidArgument, "no snapshot id")
	_, err = snapRestore(t, c, &agentdv1.RestoreRequest{Id: "nope"})
	snapWantCode(t, err, codes.InvalidArgument, "not a snapshot id")
	_, err = snapExport(t, c, "s-20200101-000000-0badc0de")
	snapWantCode(t, err, codes.NotFound, "no snapshot")
}

func TestSnapshotDeleteFreesSpace(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	c := agentdv1.NewSnapshotServiceClient(ts.Conn)
	proj := filepath.Join(ts.Options().Workspace, "proj")
	snapTree(t, proj)
	_, a, err := snapCreate(t, c, &agentdv1.CreateRequest{Root: proj})
	if err != nil {
		t.Fatal(err)
	}
	_, b, err := snapCreate(t, c, &agentdv1.CreateRequest{Root: proj})
	if err != nil {
		t.Fatal(err)
	}
	if b.GetStoredBytes() != 0 {
		t.Errorf("snapshot of an unchanged tree stored %d bytes", b.GetStoredBytes())
	}
	resp, err := c.Delete(t.Context(), &agentdv1.DeleteRequest{Id: a.Id})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetFreedBytes() != 0 {
		t.Errorf("deleting a snapshot whose blobs b shares freed %d bytes", resp.GetFreedBytes())
	}
	resp, err = c.Delete(t.Context(), &agentdv1.DeleteRequest{Id: b.Id})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetFreedBytes() < a.GetStoredBytes() {
		t.Errorf("deleting the last snapshot freed %d bytes; it stored %d", resp.GetFreedBytes(), a.GetStoredBytes())
	}
}

// TestSnapshotOfWorkspaceLeavesStateAlone: when the state directory lies
// in the tree (the default workspace is home, the state dir
// ~/.local/state/agentd), snapshots neither copy the store into itself
// nor delete it on restore.
func TestSnapshotOfWorkspaceLeavesStateAlone(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	ts := newTestServer(t, Options{Workspace: ws, StateDir: filepath.Join(ws, ".local", "state", "agentd")})
	c := agentdv1.NewSnapshotServiceClient(ts.Conn)
	os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("hi"), 0o644)
	_, snap, err := snapCreate(t, c, &agentdv1.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if snap.GetRoot() != ws || snap.GetFiles() != 1 {
		t.Errorf("snapshot of the workspace = %v", snap)
	}
	sum, err := snapRestore(t, c, &agentdv1.RestoreRequest{Id: snap.Id, DeleteExtra: true})
	if err != nil {
		t.Fatal(err)
	}
	if sum.GetPathsRemoved() != 0 {
		t.Errorf("restore removed %d paths", sum.GetPathsRemoved())
	}
	if _, err := c.Get(t.Context(), &agentdv1.GetRequest{Id: snap.Id}); err != nil {
		t.Errorf("the store did not survive: %v", err)
	}
}

// TestSnapshotUnchangedFilesNotRead counts the files the daemon opens.
func TestSnapshotUnchangedFilesNotRead(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	var opens atomic.Int64
	store, err := snapshot.Open(snapshot.Options{
		Dir:        filepath.Join(ts.Options().StateDir, "snapshots"),
		RacyWindow: time.Nanosecond, // the files were just written: count them settled
		Open: func(name string) (snapshot.File, error) {
			opens.Add(1)
			f, err := os.Open(name)
			if err != nil {
				return nil, err
			}
			return f, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ts.snaps.store = store // before any call
	c := agentdv1.NewSnapshotServiceClient(ts.Conn)
	proj := filepath.Join(ts.Options().Workspace, "proj")
	snapTree(t, proj)
	if _, _, err := snapCreate(t, c, &agentdv1.CreateRequest{Root: proj}); err != nil {
		t.Fatal(err)
	}
	if n := opens.Swap(0); n != 5 {
		t.Errorf("first snapshot opened %d files, want 5", n)
	}
	if _, _, err := snapCreate(t, c, &agentdv1.CreateRequest{Root: proj}); err != nil {
		t.Fatal(err)
	}
	if n := opens.Swap(0); n != 0 {
		t.Errorf("second snapshot opened %d files, want 0", n)
	}
}

// TestSnapshotCreateCancelled: a client that goes away mid-snapshot
// leaves no snapshot behind and the daemon serving.
func TestSnapshotCreateCancelled(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	c := agentdv1.NewSnapshotServiceClient(ts.Conn)
	proj := filepath.Join(ts.Options().Workspace, "proj")
	for i := range 300 {
		p := filepath.Join(proj, "d", strings.Repeat("x", i%7+1), string(rune('a'+i%26))+strings.Repeat("y", i/26))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, bytes.Repeat([]byte{byte(i)}, 20_000), 0o644)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	st, err := c.Create(ctx, &agentdv1.CreateRequest{Root: proj})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil { // the first progress message: it is under way
		t.Fatal(err)
	}
	cancel()
	for {
		if _, err := st.Recv(); err != nil {
			break
		}
	}
	// The daemon carries on; whatever finished or not, nothing is half there.
	_, snap, err := snapCreate(t, c, &agentdv1.CreateRequest{Root: proj})
	if err != nil {
		t.Fatal(err)
	}
	list, err := c.List(t.Context(), &agentdv1.SnapshotServiceListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.GetSnapshots() {
		if _, err := snapExport(t, c, s.GetId()); err != nil {
			t.Errorf("snapshot %s: %v", s.GetId(), err)
		}
	}
	if snap.GetFiles() != 300 {
		t.Errorf("snapshot has %d files", snap.GetFiles())
	}
}
