package agentd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/devdepot-ai/agentd/internal/activity"
	"github.com/devdepot-ai/agentd/internal/rpcerr"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// newFilesClient starts a daemon on a real unix socket and returns a
// FileService client and the workspace.
func newFilesClient(t *testing.T) (agentdv1.FileServiceClient, string, *testServer) {
	t.Helper()
	ts := newTestServer(t, Options{})
	return agentdv1.NewFileServiceClient(ts.Conn), ts.Options().Workspace, ts
}

// writeStream sends a Write stream: the header, then data in chunks.
func writeStream(ctx context.Context, c agentdv1.FileServiceClient, hdr *agentdv1.WriteHeader, data []byte, chunk int) (*agentdv1.WriteResponse, error) {
	st, err := c.Write(ctx)
	if err != nil {
		return nil, err
	}
	if err := st.Send(&agentdv1.WriteRequest{Msg: &agentdv1.WriteRequest_Header{Header: hdr}}); err != nil {
		return nil, err
	}
	for len(data) > 0 {
		n := min(chunk, len(data))
		if err := st.Send(&agentdv1.WriteRequest{Msg: &agentdv1.WriteRequest_Data{Data: data[:n]}}); err != nil {
			break // the server answered early: CloseAndRecv has its error
		}
		data = data[n:]
	}
	return st.CloseAndRecv()
}

// readStream reads a whole Read stream.
func readStream(t *testing.T, c agentdv1.FileServiceClient, req *agentdv1.ReadRequest) ([]byte, *agentdv1.FileInfo, error) {
	t.Helper()
	st, err := c.Read(t.Context(), req)
	if err != nil {
		return nil, nil, err
	}
	var data []byte
	var info *agentdv1.FileInfo
	for i := 0; ; i++ {
		msg, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return data, info, nil
		}
		if err != nil {
			return nil, nil, err
		}
		if (i == 0) != (msg.Info != nil) {
			t.Errorf("message %d: info %v; want it in the first message only", i, msg.Info)
		}
		if i == 0 {
			info = msg.Info
		}
		if len(msg.Data) > 32<<10 {
			t.Errorf("chunk of %d bytes", len(msg.Data))
		}
		if msg.Offset != req.Offset+int64(len(data)) {
			t.Errorf("chunk offset %d, want %d", msg.Offset, req.Offset+int64(len(data)))
		}
		data = append(data, msg.Data...)
	}
}

func hexSHA(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func wantStatus(t *testing.T, err error, code codes.Code, fragment string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("error %v: code %v, want %v", err, status.Code(err), code)
	}
	if !strings.Contains(status.Convert(err).Message(), fragment) {
		t.Errorf("error message %q does not mention %q", status.Convert(err).Message(), fragment)
	}
}

func TestFilesWriteReadRoundTrip(t *testing.T) {
	t.Parallel()
	c, ws, _ := newFilesClient(t)
	ctx := t.Context()
	data := make([]byte, 5<<20+123) // more than one gRPC message
	for i := range data {
		data[i] = byte(i * 7)
	}
	resp, err := writeStream(ctx, c, &agentdv1.WriteHeader{Path: "sub/blob.bin", CreateParents: true, Mode: 0o600}, data, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	want := &agentdv1.WriteResponse{Path: filepath.Join(ws, "sub/blob.bin"), Size: int64(len(data)), Sha256: hexSHA(data), Created: true}
	if diff := cmp.Diff(resp, want, protocmp.Transform()); diff != "" {
		t.Errorf("Write (-got +want):\n%s", diff)
	}

	got, info, err := readStream(t, c, &agentdv1.ReadRequest{Path: "sub/blob.bin"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Errorf("read back %d bytes, differing from the %d written", len(got), len(data))
	}
	if info.GetType() != agentdv1.FileType_FILE_TYPE_FILE || info.GetMode() != 0o600 || info.GetSize() != int64(len(data)) ||
		info.GetPath() != want.Path || info.GetModified() == nil {
		t.Errorf("first message info = %v", info)
	}
	part, _, err := readStream(t, c, &agentdv1.ReadRequest{Path: want.Path, Offset: 100, Limit: 40000})
	if err != nil || !bytes.Equal(part, data[100:40100]) {
		t.Errorf("range read: %d bytes, %v", len(part), err)
	}
	empty, info, err := readStream(t, c, &agentdv1.ReadRequest{Path: want.Path, Offset: int64(len(data)) + 10})
	if err != nil || len(empty) != 0 || info == nil {
		t.Errorf("read past the end: %d bytes, info %v, %v; want one message with info and no data", len(empty), info, err)
	}

	// Append, then a text read with ReadLines.
	if _, err := writeStream(ctx, c, &agentdv1.WriteHeader{Path: "notes.txt"}, []byte("one\ntwo\n"), 3); err != nil {
		t.Fatal(err)
	}
	resp, err = writeStream(ctx, c, &agentdv1.WriteHeader{Path: "notes.txt", Append: true, ExpectedSha256: hexSHA([]byte("one\ntwo\n"))}, []byte("three\n"), 100)
	if err != nil || resp.Size != 14 || resp.Created {
		t.Fatalf("append = %v, %v", resp, err)
	}
	lines, err := c.ReadLines(ctx, &agentdv1.ReadLinesRequest{Path: "notes.txt", FromLine: 2})
	if err != nil {
		t.Fatal(err)
	}
	wantLines := &agentdv1.ReadLinesResponse{Lines: []string{"two", "three"}, FromLine: 2, TotalLines: 3, Size: 14, Sha256: resp.Sha256}
	if diff := cmp.Diff(lines, wantLines, protocmp.Transform()); diff != "" {
		t.Errorf("ReadLines (-got +want):\n%s", diff)
	}
}

func TestFilesWriteErrors(t *testing.T) {
	t.Parallel()
	c, ws, _ := newFilesClient(t)
	ctx := t.Context()
	if err := os.WriteFile(filepath.Join(ws, "keep.txt"), []byte("original"), 0o644); err != nil {
		t.Fatal(err)
	}

	_, err := writeStream(ctx, c, &agentdv1.WriteHeader{Path: "keep.txt", ExpectedSha256: hexSHA([]byte("other"))}, []byte("new"), 10)
	wantStatus(t, err, codes.FailedPrecondition, "has changed")
	_, err = writeStream(ctx, c, &agentdv1.WriteHeader{Path: "keep.txt", ExpectedSha256: "absent"}, []byte("new"), 10)
	wantStatus(t, err, codes.FailedPrecondition, "must be absent")
	_, err = writeStream(ctx, c, &agentdv1.WriteHeader{Path: "no/such/dir/f"}, []byte("x"), 10)
	wantStatus(t, err, codes.NotFound, "create_parents")
	_, err = writeStream(ctx, c, &agentdv1.WriteHeader{Path: "m", Mode: 0o10644}, []byte("x"), 10)
	wantStatus(t, err, codes.InvalidArgument, "not a permission mode")
	_, err = writeStream(ctx, c, &agentdv1.WriteHeader{Path: ""}, []byte("x"), 10)
	wantStatus(t, err, codes.InvalidArgument, "path is empty")

	// Data before the header.
	st, err := c.Write(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&agentdv1.WriteRequest{Msg: &agentdv1.WriteRequest_Data{Data: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	_, err = st.CloseAndRecv()
	wantStatus(t, err, codes.InvalidArgument, "must be the header")

	// A second header.
	st, err = c.Write(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hdr := &agentdv1.WriteRequest{Msg: &agentdv1.WriteRequest_Header{Header: &agentdv1.WriteHeader{Path: "keep.txt"}}}
	_ = st.Send(hdr)
	_ = st.Send(&agentdv1.WriteRequest{Msg: &agentdv1.WriteRequest_Data{Data: []byte("partial")}})
	_ = st.Send(hdr)
	_, err = st.CloseAndRecv()
	wantStatus(t, err, codes.InvalidArgument, "second header")

	// An empty stream.
	st, err = c.Write(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.CloseAndRecv()
	wantStatus(t, err, codes.InvalidArgument, "empty Write stream")

	if got, _ := os.ReadFile(filepath.Join(ws, "keep.txt")); string(got) != "original" {
		t.Errorf("keep.txt = %q after failed writes", got)
	}
	assertClean(t, ws, []string{"keep.txt"})
}

// assertClean fails unless dir holds exactly the names given: no
// temporary files left behind.
func assertClean(t *testing.T, dir string, names []string) {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, de := range des {
		got = append(got, de.Name())
	}
	if diff := cmp.Diff(got, names); diff != "" {
		t.Errorf("%s holds (-got +want):\n%s", dir, diff)
	}
}

// TestFilesWriteClientVanishes cancels a Write stream half way: the file
// keeps its content and no temporary file is left.
func TestFilesWriteClientVanishes(t *testing.T) {
	t.Parallel()
	c, ws, ts := newFilesClient(t)
	if err := os.WriteFile(filepath.Join(ws, "f"), []byte("original"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Follow the activity log: the write's record comes once the handler
	// has finished, which is when there must be nothing left behind.
	watchCtx, stopWatch := context.WithCancel(t.Context())
	defer stopWatch()
	records := make(chan activity.Record, 16)
	go func() {
		_ = ts.activity.Watch(watchCtx, 0, true, func(r activity.Record) error {
			if r.Kind == "files.write" {
				records <- r
			}
			return nil
		})
	}()

	for _, path := range []string{"f", "new-file"} {
		ctx, cancel := context.WithCancel(t.Context())
		st, err := c.Write(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(&agentdv1.WriteRequest{Msg: &agentdv1.WriteRequest_Header{Header: &agentdv1.WriteHeader{Path: path}}}); err != nil {
			t.Fatal(err)
		}
		for range 8 {
			if err := st.Send(&agentdv1.WriteRequest{Msg: &agentdv1.WriteRequest_Data{Data: make([]byte, 64<<10)}}); err != nil {
				t.Fatal(err)
			}
		}
		cancel() // the client goes away without closing the stream
		r := <-records
		if r.Outcome != activity.Failed || !strings.Contains(r.Error, "unchanged") {
			t.Errorf("write record = %+v, want a failure leaving the file unchanged", r)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "f")); string(got) != "original" {
		t.Errorf("f = %q after an abandoned write", got)
	}
	assertClean(t, ws, []string{"f"})
}

func TestFilesEdit(t *testing.T) {
	t.Parallel()
	c, ws, _ := newFilesClient(t)
	ctx := t.Context()
	src := "package x\n\nfunc a() int {\n\treturn 1\n}\n\nfunc b() int {\n\treturn 1\n}\n"
	p := filepath.Join(ws, "x.go")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}

	_, err := c.Edit(ctx, &agentdv1.EditRequest{Path: "x.go", Edits: []*agentdv1.Replacement{{OldString: "return 1", NewString: "return 2"}}})
	wantStatus(t, err, codes.FailedPrecondition, "old_string occurs 2 times in "+p+" (lines 4, 8); add surrounding lines to make it unique, or set replace_all")
	_, err = c.Edit(ctx, &agentdv1.EditRequest{Path: "x.go", Edits: []*agentdv1.Replacement{{OldString: "return 3", NewString: "return 2"}}})
	wantStatus(t, err, codes.NotFound, "closest match at line 4")
	_, err = c.Edit(ctx, &agentdv1.EditRequest{Path: "x.go", Edits: []*agentdv1.Replacement{{OldString: "", NewString: "x"}}})
	wantStatus(t, err, codes.InvalidArgument, "old_string is empty")

	resp, err := c.Edit(ctx, &agentdv1.EditRequest{Path: "x.go", Edits: []*agentdv1.Replacement{
		{OldString: "func a() int {\n\treturn 1", NewString: "func a() int {\n\treturn 2"},
		{OldString: "return 1", NewString: "return 3"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	after := strings.Replace(strings.Replace(src, "return 1", "return 2", 1), "return 1", "return 3", 1)
	want := &agentdv1.EditResponse{
		Replacements: 2,
		Path:         p,
		Sha256:       hexSHA([]byte(after)),
		Diff: "--- " + p + "\n+++ " + p + "\n@@ -1,9 +1,9 @@\n package x\n \n func a() int {\n-\treturn 1\n+\treturn 2\n }\n \n func b() int {\n" +
			"-\treturn 1\n+\treturn 3\n }\n",
	}
	if diff := cmp.Diff(resp, want, protocmp.Transform()); diff != "" {
		t.Errorf("Edit (-got +want):\n%s", diff)
	}
	if got, _ := os.ReadFile(p); string(got) != after {
		t.Errorf("file after edit:\n%s", got)
	}
}

func TestFilesSearchAndGlob(t *testing.T) {
	t.Parallel()
	c, ws, _ := newFilesClient(t)
	ctx := t.Context()
	for name, content := range map[string]string{
		".gitignore":   "build/\n",
		"a/one.go":     "package a\n// TODO: one\n",
		"a/two.go":     "package a\n\nfunc f() {} // TODO two\n",
		"b/notes.md":   "todo later\n",
		"build/gen.go": "// TODO generated\n",
	} {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	st, err := c.Search(ctx, &agentdv1.SearchRequest{Pattern: "TODO", ContextLines: 1})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []*agentdv1.SearchResponse
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	match := func(path string, line int64, text string, before, after []string) *agentdv1.SearchResponse {
		return &agentdv1.SearchResponse{Result: &agentdv1.SearchResponse_Match{Match: &agentdv1.SearchMatch{
			Path: filepath.Join(ws, path), LineNumber: line, Line: text, Before: before, After: after}}}
	}
	want := []*agentdv1.SearchResponse{
		match("a/one.go", 2, "// TODO: one", []string{"package a"}, nil),
		match("a/two.go", 3, "func f() {} // TODO two", []string{""}, nil),
		{Result: &agentdv1.SearchResponse_Summary{Summary: &agentdv1.SearchSummary{FilesScanned: 3, Matches: 2}}},
	}
	if diff := cmp.Diff(msgs, want, protocmp.Transform()); diff != "" {
		t.Errorf("Search stream (-got +want):\n%s", diff)
	}

	st, err = c.Search(ctx, &agentdv1.SearchRequest{Pattern: "(unclosed"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Recv()
	wantStatus(t, err, codes.InvalidArgument, "invalid regular expression")

	g, err := c.Glob(ctx, &agentdv1.GlobRequest{Pattern: "**/*.go"})
	if err != nil {
		t.Fatal(err)
	}
	wantGlob := &agentdv1.GlobResponse{Paths: []string{filepath.Join(ws, "a/one.go"), filepath.Join(ws, "a/two.go")}}
	if diff := cmp.Diff(g, wantGlob, protocmp.Transform()); diff != "" {
		t.Errorf("Glob (-got +want):\n%s", diff)
	}
	g, err = c.Glob(ctx, &agentdv1.GlobRequest{Pattern: "**/*.go", NoIgnore: true, MaxResults: 1})
	if err != nil || len(g.Paths) != 1 || !g.Truncated {
		t.Errorf("Glob with max_results 1 = %v, %v", g, err)
	}
}

func TestFilesTreeOperations(t *testing.T) {
	t.Parallel()
	c, ws, ts := newFilesClient(t)
	ctx := t.Context()

	md, err := c.MakeDir(ctx, &agentdv1.MakeDirRequest{Path: "p/q", Parents: true, Mode: 0o2750})
	if err != nil {
		t.Fatal(err)
	}
	if md.Info.GetType() != agentdv1.FileType_FILE_TYPE_DIRECTORY || md.Info.GetMode() != 0o2750 || md.Info.GetPath() != filepath.Join(ws, "p/q") {
		t.Errorf("MakeDir = %v", md.Info)
	}
	_, err = c.MakeDir(ctx, &agentdv1.MakeDirRequest{Path: "p/q"})
	wantStatus(t, err, codes.AlreadyExists, "exists already")

	if _, err := writeStream(ctx, c, &agentdv1.WriteHeader{Path: "p/q/f.txt", Mode: 0o4755}, []byte("x"), 1); err != nil {
		t.Fatal(err)
	}
	stat, err := c.Stat(ctx, &agentdv1.StatRequest{Path: "p/q/f.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if stat.Info.GetMode() != 0o4755 || stat.Info.GetUid() != uint32(os.Getuid()) || stat.Info.GetName() != "f.txt" {
		t.Errorf("Stat = %v", stat.Info)
	}
	if err := os.Symlink("q/f.txt", filepath.Join(ws, "p/link")); err != nil {
		t.Fatal(err)
	}
	list, err := c.List(ctx, &agentdv1.FileServiceListRequest{Path: "p", Depth: 2})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range list.Entries {
		names = append(names, strings.TrimPrefix(e.Path, ws+"/")+":"+e.Type.String()+":"+e.SymlinkTarget)
	}
	wantNames := []string{"p/link:FILE_TYPE_SYMLINK:q/f.txt", "p/q:FILE_TYPE_DIRECTORY:", "p/q/f.txt:FILE_TYPE_FILE:"}
	if diff := cmp.Diff(names, wantNames); diff != "" {
		t.Errorf("List (-got +want):\n%s", diff)
	}

	mv, err := c.Move(ctx, &agentdv1.MoveRequest{Source: "p/q/f.txt", Destination: "p/g.txt"})
	if err != nil || mv.Info.GetPath() != filepath.Join(ws, "p/g.txt") {
		t.Fatalf("Move = %v, %v", mv, err)
	}
	_, err = c.Move(ctx, &agentdv1.MoveRequest{Source: "p/g.txt", Destination: "p/link"})
	wantStatus(t, err, codes.AlreadyExists, "set overwrite")

	_, err = c.Remove(ctx, &agentdv1.RemoveRequest{Path: "p"})
	wantStatus(t, err, codes.FailedPrecondition, "set recursive")
	_, err = c.Remove(ctx, &agentdv1.RemoveRequest{Path: ".", Recursive: true})
	wantStatus(t, err, codes.FailedPrecondition, "workspace")
	if _, err := c.Remove(ctx, &agentdv1.RemoveRequest{Path: "p", Recursive: true}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Stat(ctx, &agentdv1.StatRequest{Path: "p"})
	wantStatus(t, err, codes.NotFound, "does not exist")
	_, err = c.Stat(ctx, &agentdv1.StatRequest{Path: "a\x00b"})
	wantStatus(t, err, codes.InvalidArgument, "NUL")

	// Every operation is in the activity log.
	var kinds []string
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_ = ts.activity.Watch(wctx, 0, false, func(r activity.Record) error {
		if strings.HasPrefix(r.Kind, "files.") {
			kinds = append(kinds, r.Kind)
		}
		return nil
	})
	wantKinds := []string{"files.mkdir", "files.mkdir", "files.write", "files.stat", "files.list", "files.move", "files.move",
		"files.remove", "files.remove", "files.remove", "files.stat", "files.stat"}
	if diff := cmp.Diff(kinds, wantKinds); diff != "" {
		t.Errorf("activity kinds (-got +want):\n%s", diff)
	}
}

func TestModeConversion(t *testing.T) {
	t.Parallel()
	for _, u := range []uint32{0, 0o644, 0o755, 0o4755, 0o2750, 0o1777, 0o7777} {
		m, err := modeFromProto("mode", u)
		if err != nil {
			t.Fatal(err)
		}
		if got := modeToProto(m); got != u {
			t.Errorf("%#o -> %v -> %#o", u, m, got)
		}
	}
	if _, err := modeFromProto("mode", 0o100644); status.Code(rpcerr.Status(err)) != codes.InvalidArgument {
		t.Errorf("mode with file type bits: %v", err)
	}
}
