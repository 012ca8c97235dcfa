package conformance_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/devdepot-ai/agentd/agentd"
	"github.com/devdepot-ai/agentd/internal/conformance"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// daemon is a real agentd serving on a unix socket, and a client
// connection to it.
type daemon struct {
	cc        *grpc.ClientConn
	workspace string
}

// startDaemon starts agentd with opts (Workspace, StateDir, Env and Logger
// filled in when empty) and connects to it.
func startDaemon(t *testing.T, opts agentd.Options) *daemon {
	t.Helper()
	dir := t.TempDir()
	if opts.Workspace == "" {
		opts.Workspace = filepath.Join(dir, "ws")
		if err := os.Mkdir(opts.Workspace, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if opts.StateDir == "" {
		opts.StateDir = filepath.Join(dir, "state")
	}
	if opts.Env == nil {
		opts.Env = os.Environ()
	}
	opts.Logger = zaptest.NewLogger(t)
	srv, err := agentd.New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "agentd.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &daemon{cc: cc, workspace: opts.Workspace}
}

// machineIDs are the checks that run against a daemon in machine mode.
var machineIDs = []string{
	conformance.IDInfo, conformance.IDScratch,
	conformance.IDWrite, conformance.IDRead, conformance.IDEdit, conformance.IDSearch, conformance.IDGlob,
	conformance.IDShell, conformance.IDExitCodes, conformance.IDStderr, conformance.IDTimeout, conformance.IDPty,
	conformance.IDPython, conformance.IDPythonSession, conformance.IDSnapshot,
}

func ids(results []conformance.Result) []string {
	var out []string
	for _, r := range results {
		out = append(out, r.ID)
	}
	return out
}

func byID(t *testing.T, results []conformance.Result, id string) conformance.Result {
	t.Helper()
	for _, r := range results {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no result for %s in %v", id, ids(results))
	return conformance.Result{}
}

// assertClean fails when the run left anything behind in the workspace,
// the snapshot store or the Python sessions.
func assertClean(t *testing.T, d *daemon) {
	t.Helper()
	ents, err := os.ReadDir(d.workspace)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left behind in the workspace: %s", e.Name())
	}
	snaps, err := agentdv1.NewSnapshotServiceClient(d.cc).List(t.Context(), &agentdv1.SnapshotServiceListRequest{})
	if err != nil || len(snaps.GetSnapshots()) != 0 {
		t.Errorf("snapshots left behind: %v (%v)", snaps.GetSnapshots(), err)
	}
	sessions, err := agentdv1.NewPythonServiceClient(d.cc).ListSessions(t.Context(), &agentdv1.ListSessionsRequest{})
	if err != nil || len(sessions.GetSessions()) != 0 {
		t.Errorf("Python sessions left behind: %v (%v)", sessions.GetSessions(), err)
	}
}

// TestMachineMode runs the whole suite against a healthy daemon in
// machine mode: every check runs (no container checks) and passes, each
// result reaches Progress as it comes, and nothing is left behind.
func TestMachineMode(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, agentd.Options{})
	var progress []conformance.Result
	results := conformance.Run(t.Context(), d.cc, conformance.Options{
		Progress: func(r conformance.Result) { progress = append(progress, r) },
	})
	if diff := cmp.Diff(ids(results), machineIDs); diff != "" {
		t.Errorf("checks run (-got +want):\n%s", diff)
	}
	for _, r := range results {
		if !r.OK || r.Name == "" || r.Duration <= 0 || r.Breaks != "" || r.Fix != "" {
			t.Errorf("%+v, want a named pass with a duration", r)
		}
	}
	if diff := cmp.Diff(progress, results); diff != "" {
		t.Errorf("Progress saw (-got +want):\n%s", diff)
	}
	assertClean(t, d)
}

// TestOutgoingMetadata runs the suite as the hub does: credentials in the
// context's outgoing metadata.
func TestOutgoingMetadata(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, agentd.Options{Token: "s3cret"})

	results := conformance.Run(t.Context(), d.cc, conformance.Options{})
	if len(results) != 1 || results[0].ID != conformance.IDInfo || results[0].OK || !strings.Contains(results[0].Detail, "unauthenticated") {
		t.Errorf("without the token: %+v, want Info alone, failed unauthenticated", results)
	}

	ctx := metadata.NewOutgoingContext(t.Context(), metadata.Pairs("authorization", "Bearer s3cret"))
	results = conformance.Run(ctx, d.cc, conformance.Options{})
	for _, r := range results {
		if !r.OK {
			t.Errorf("with the token: %+v", r)
		}
	}
	if len(results) != len(machineIDs) {
		t.Errorf("with the token ran %v, want %v", ids(results), machineIDs)
	}
}

// TestSandboxChecksFail forces the container checks on a daemon that is
// not in a container: the uid, read-only root and workspace path checks
// must fail, saying what breaks and how to fix it, and the probes must
// leave nothing behind.
func TestSandboxChecksFail(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, agentd.Options{})
	results := conformance.Run(t.Context(), d.cc, conformance.Options{Sandbox: true})
	for _, r := range results {
		t.Logf("%+v", r)
	}
	want := append(slices.Clone(machineIDs), conformance.IDSandboxUID, conformance.IDReadOnlyRoot,
		conformance.IDWorkspacePath, conformance.IDWritableWorkspace, conformance.IDWritableTmp, conformance.IDWritableHome)
	if diff := cmp.Diff(ids(results), want); diff != "" {
		t.Fatalf("checks run (-got +want):\n%s", diff)
	}
	fails := []struct{ id, fix string }{
		{conformance.IDReadOnlyRoot, "--read-only"},
		{conformance.IDWorkspacePath, "/workspace"},
	}
	if os.Getuid() != 1000 {
		fails = append(fails, struct{ id, fix string }{conformance.IDSandboxUID, "USER 1000"})
	}
	for _, f := range fails {
		r := byID(t, results, f.id)
		if r.OK || r.Breaks == "" || r.Detail == "" || !strings.Contains(r.Fix, f.fix) {
			t.Errorf("%+v, want a failure with what breaks and a fix naming %q", r, f.fix)
		}
	}
	for _, id := range append(slices.Clone(machineIDs), conformance.IDWritableWorkspace, conformance.IDWritableTmp, conformance.IDWritableHome) {
		if r := byID(t, results, id); !r.OK {
			t.Errorf("%+v, want a pass", r)
		}
	}
	if _, err := os.Lstat("/.agentd-rw-probe"); !os.IsNotExist(err) {
		t.Errorf("the read-only root probe was left behind (%v)", err)
	}
	assertClean(t, d)
}

// TestNoPython runs the Python checks alone against a daemon whose
// interpreter does not exist: both fail saying every cell fails and to
// install python3.
func TestNoPython(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, agentd.Options{Python: filepath.Join(t.TempDir(), "no-such-python3")})
	results := conformance.Run(t.Context(), d.cc, conformance.Options{Only: []string{conformance.IDPython, conformance.IDPythonSession}})
	want := []string{conformance.IDInfo, conformance.IDScratch, conformance.IDPython, conformance.IDPythonSession}
	if diff := cmp.Diff(ids(results), want); diff != "" {
		t.Fatalf("checks run (-got +want):\n%s", diff)
	}
	for _, r := range results[2:] {
		if r.OK || r.Breaks != "every Python cell fails" || !strings.Contains(r.Fix, "install python3") || !strings.Contains(r.Detail, "not found") {
			t.Errorf("%+v, want: every Python cell fails, install python3", r)
		}
	}
	assertClean(t, d)
}

// TestKeepAndPrefix keeps the scratch directory, named with the prefix
// given.
func TestKeepAndPrefix(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, agentd.Options{})
	results := conformance.Run(t.Context(), d.cc, conformance.Options{Keep: true, ScratchPrefix: ".hub-check-", Only: []string{conformance.IDWrite}})
	if len(results) != 3 || !results[2].OK {
		t.Fatalf("%+v", results)
	}
	m, err := filepath.Glob(filepath.Join(d.workspace, ".hub-check-*", "write", "sub", "notes.txt"))
	if err != nil || len(m) != 1 {
		t.Errorf("kept scratch files: %v (%v)", m, err)
	}
}
