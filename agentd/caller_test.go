package agentd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/devdepot-ai/agentd/internal/wire"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// serveOn starts a Server with opts on the given listeners and stops it at
// the end of the test.
func serveOn(t *testing.T, opts Options, listeners ...net.Listener) *Server {
	t.Helper()
	dir := t.TempDir()
	opts.Workspace, opts.StateDir, opts.Env = dir, filepath.Join(dir, ".state"), os.Environ()
	opts.Logger = zaptest.NewLogger(t)
	srv, err := New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, listeners...) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return srv
}

func dial(t *testing.T, target string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func listenUnix(t *testing.T) (net.Listener, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "a.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	return lis, "unix://" + sock
}

// who is an activity record's actor and claim.
type who struct{ Actor, Claimed string }

// statAs stats path on cc with metadata kv (agentd-actor, …) and returns
// who the daemon's activity says asked.
func statAs(t *testing.T, cc *grpc.ClientConn, path string, kv ...string) who {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(t.Context(), kv...)
	_, _ = agentdv1.NewFileServiceClient(cc).Stat(ctx, &agentdv1.StatRequest{Path: path}) // missing: recorded all the same
	r := lastRecord(t, cc, ctx, func(r *agentdv1.ActivityRecord) bool {
		return r.GetKind() == "files.stat" && (r.GetSummary() == "stat "+path || strings.HasSuffix(r.GetSummary(), "/"+path))
	})
	return who{r.GetActor(), r.GetClaimedActor()}
}

// lastRecord returns the newest retained activity record that match takes.
func lastRecord(t *testing.T, cc *grpc.ClientConn, ctx context.Context, match func(*agentdv1.ActivityRecord) bool) *agentdv1.ActivityRecord {
	t.Helper()
	st, err := agentdv1.NewActivityServiceClient(cc).Watch(ctx, &agentdv1.WatchRequest{NoFollow: true})
	if err != nil {
		t.Fatal(err)
	}
	var last *agentdv1.ActivityRecord
	for {
		m, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if match(m.GetRecord()) {
			last = m.GetRecord()
		}
	}
	if last == nil {
		t.Fatal("no matching activity record")
	}
	return last
}

// awaitRecord follows the daemon's activity (replay, then live) until a
// record matches, for at most 20 s.
func awaitRecord(t *testing.T, cc *grpc.ClientConn, ctx context.Context, match func(*agentdv1.ActivityRecord) bool) *agentdv1.ActivityRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	st, err := agentdv1.NewActivityServiceClient(cc).Watch(ctx, &agentdv1.WatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("no matching activity record: %v", err)
		}
		if match(m.GetRecord()) {
			return m.GetRecord()
		}
	}
}

// me is the actor the test process is on a unix socket.
func me(t *testing.T) string {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	return "uid:" + u.Uid + "(" + u.Username + ")"
}

// TestActorOnUnixSocket: on the local socket the actor is the peer's uid
// (SO_PEERCRED), whatever agentd-actor the caller sends; the claim is kept
// beside it, labelled, and only when it says something else.
func TestActorOnUnixSocket(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("peer credentials are read on linux and darwin")
	}
	lis, target := listenUnix(t)
	serveOn(t, Options{}, lis)
	cc := dial(t, target)
	uid := me(t)
	for i, c := range []struct {
		name string
		kv   []string
		want who
	}{
		{"no claim", nil, who{uid, ""}},
		{"forged actor", []string{wire.MDActor, "bob"}, who{uid, "bob"}},
		{"claim of the truth", []string{wire.MDActor, uid}, who{uid, ""}},
		{"long claim", []string{wire.MDActor, strings.Repeat("b", 500)}, who{uid, strings.Repeat("b", maxClaim) + "…"}},
	} {
		got := statAs(t, cc, "case-"+string(rune('a'+i)), c.kv...)
		if diff := cmp.Diff(got, c.want); diff != "" {
			t.Errorf("%s: who asked (-got +want):\n%s", c.name, diff)
		}
	}

	// A process's exit, recorded when it ends, keeps its start's actor
	// and claim.
	ctx := metadata.AppendToOutgoingContext(t.Context(), wire.MDActor, "bob")
	st, err := agentdv1.NewProcessServiceClient(cc).Start(ctx, &agentdv1.StartRequest{Argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	var id string
	for {
		m, err := st.Recv()
		if err != nil {
			break
		}
		if s := m.GetEvent().GetStarted(); s != nil {
			id = s.GetId()
		}
	}
	if _, err := agentdv1.NewProcessServiceClient(cc).Wait(ctx, &agentdv1.WaitRequest{Id: id}); err != nil {
		t.Fatal(err)
	}
	// The exit is recorded as the process ends, which can be a moment
	// after Wait answers: follow the log until it comes.
	r := awaitRecord(t, cc, ctx, func(r *agentdv1.ActivityRecord) bool {
		return r.GetKind() == "process.exit" && r.GetObjectId() == id
	})
	if diff := cmp.Diff(who{r.GetActor(), r.GetClaimedActor()}, who{uid, "bob"}); diff != "" {
		t.Errorf("process.exit: who asked (-got +want):\n%s", diff)
	}
}

// TestActorOnTokenTCP: with a bearer token, a TCP caller is the token,
// named by the start of its SHA-256, never by the token itself.
func TestActorOnTokenTCP(t *testing.T) {
	t.Parallel()
	const token = "s3cret-token-of-the-daemon"
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := serveOn(t, Options{Token: token}, lis)
	cc := dial(t, lis.Addr().String())
	sum := sha256.Sum256([]byte(token))
	want := who{"token:" + hex.EncodeToString(sum[:])[:8], "bob"}
	got := statAs(t, cc, "x", wire.MDAuthorization, wire.BearerPrefix+token, wire.MDActor, "bob")
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("who asked (-got +want):\n%s", diff)
	}
	srv.Close() // the audit log is complete
	b, err := os.ReadFile(filepath.Join(srv.Options().StateDir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), token) {
		t.Errorf("the audit log holds the token:\n%s", b)
	}
}

// TestActorOnTCPWithoutToken: on a loopback port without a token, nothing
// proves who called: the actor is the peer's address.
func TestActorOnTCPWithoutToken(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveOn(t, Options{}, lis)
	got := statAs(t, dial(t, lis.Addr().String()), "x", wire.MDActor, "bob")
	if !strings.HasPrefix(got.Actor, "tcp:127.0.0.1:") || got.Claimed != "bob" {
		t.Errorf("who asked = %+v, want actor tcp:127.0.0.1:PORT claiming bob", got)
	}
}

// TestActorTrustedOnTheHubListenerOnly serves one daemon on two unix
// sockets, one marked as the hub's tunnel: the same agentd-actor is the
// actor there, and only a claim on the other.
func TestActorTrustedOnTheHubListenerOnly(t *testing.T) {
	t.Parallel()
	hubLis, hubTarget := listenUnix(t)
	localLis, localTarget := listenUnix(t)
	serveOn(t, Options{}, hubListener{hubLis}, localLis)
	if diff := cmp.Diff(statAs(t, dial(t, hubTarget), "via-hub", wire.MDActor, "alice"), who{"alice", ""}); diff != "" {
		t.Errorf("through the hub: who asked (-got +want):\n%s", diff)
	}
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		return
	}
	if diff := cmp.Diff(statAs(t, dial(t, localTarget), "local", wire.MDActor, "alice"), who{me(t), "alice"}); diff != "" {
		t.Errorf("on the local socket: who asked (-got +want):\n%s", diff)
	}
}

// TestCleanClaim: a claim is printed on one line of `agentd log`; gRPC
// clients refuse control characters in metadata, but a raw HTTP/2 peer
// need not.
func TestCleanClaim(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                             "",
		"bob":                          "bob",
		"bob\n2026-01-01  alice  x":    "bob?2026-01-01  alice  x",
		"a\x1b[31mred":                 "a?[31mred",
		strings.Repeat("é", 100):       strings.Repeat("é", maxClaim/2) + "…",
		"x" + strings.Repeat("é", 100): "x" + strings.Repeat("é", maxClaim/2-1) + "…",
	} {
		if got := cleanClaim(in); got != want {
			t.Errorf("cleanClaim(%q) = %q, want %q", in, got, want)
		}
	}
}
