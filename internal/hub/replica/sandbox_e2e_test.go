package replica_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/internal/hub"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/replica"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/hub/store/pgtest"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/docker"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// Two hub replicas on one PostgreSQL database that run sandboxes, as on
// two hosts: here on the one local Docker engine, each with a hub ID and
// socket directory of its own. Each replica's driver is guarded: it fails
// the test if the replica touches a container of another hub's (on two
// hosts it could not even see it).

// guard is a sandbox.Driver that lets its replica touch only containers
// with its own hub label.
type guard struct {
	sandbox.Driver
	hub string

	mu  sync.Mutex
	bad []string
}

func (g *guard) violation(format string, args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.bad = append(g.bad, fmt.Sprintf(format, args...))
}

// check records a violation if id is another hub's container.
func (g *guard) check(ctx context.Context, op, id string) {
	in, err := g.Driver.Inspect(context.WithoutCancel(ctx), id)
	if err == nil && in.Labels[sandbox.LabelHub] != g.hub {
		g.violation("%s %s: a container of hub %s", op, id, in.Labels[sandbox.LabelHub])
	}
}

func (g *guard) Create(ctx context.Context, s sandbox.Spec) (string, error) {
	if s.Labels[sandbox.LabelHub] != g.hub {
		g.violation("create %s labelled hub %s", s.Name, s.Labels[sandbox.LabelHub])
	}
	return g.Driver.Create(ctx, s)
}

func (g *guard) Start(ctx context.Context, id string) error {
	g.check(ctx, "start", id)
	return g.Driver.Start(ctx, id)
}

func (g *guard) Stop(ctx context.Context, id string, grace time.Duration) error {
	g.check(ctx, "stop", id)
	return g.Driver.Stop(ctx, id, grace)
}

func (g *guard) Remove(ctx context.Context, id string) error {
	g.check(ctx, "remove", id)
	return g.Driver.Remove(ctx, id)
}

func (g *guard) Inspect(ctx context.Context, id string) (sandbox.Info, error) {
	g.check(ctx, "inspect", id)
	return g.Driver.Inspect(ctx, id)
}

func (g *guard) List(ctx context.Context, labels map[string]string) ([]sandbox.Info, error) {
	if labels[sandbox.LabelHub] != g.hub {
		g.violation("list %v: not only its own containers", labels)
	}
	return g.Driver.List(ctx, labels)
}

// sbReplica is one replica with its sandbox driver and a client.
type sbReplica struct {
	*hubtest.Hub
	t     *testing.T
	hubID string
	guard *guard
	cc    *grpc.ClientConn
}

// sandboxReplicas starts replicas A and B on one new database; tune
// changes each one's sandbox options (i is 0 for A, 1 for B).
func sandboxReplicas(t *testing.T, tune func(i int, o *sandboxes.Options)) (a, b *sbReplica) {
	t.Helper()
	sandboxtest.BaseImage(t) // skips without an engine
	drv, err := docker.New(docker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	url := pgtest.Database(t)
	agentdDir := sandboxtest.AgentdBinary(t)
	suffix := strings.ToLower(store.NewID(""))
	rs := make([]*sbReplica, 2)
	for i, name := range []string{"a", "b"} {
		g := &guard{Driver: drv, hub: "hub-" + name + "-" + suffix}
		// Whatever a test leaves, its containers go with it; and neither
		// replica touched the other's.
		t.Cleanup(func() {
			infos, _ := drv.List(context.Background(), map[string]string{sandbox.LabelManaged: "1", sandbox.LabelHub: g.hub})
			for _, in := range infos {
				_ = drv.Remove(context.Background(), in.ID)
			}
			g.mu.Lock()
			defer g.mu.Unlock()
			for _, v := range g.bad {
				t.Errorf("replica %s: %s", name, v)
			}
		})
		o := sandboxes.Options{
			Driver: g, HubID: g.hub, AgentdDir: agentdDir, SocketDir: t.TempDir(),
			BuiltinNetwork: "none", StartTimeout: 60 * time.Second,
			Limits: sandbox.Limits{CPUs: 1, MemoryBytes: 256 << 20, Pids: 256, TmpBytes: 16 << 20, HomeBytes: 16 << 20},
		}
		if tune != nil {
			tune(i, &o)
		}
		var h *hubtest.Hub
		if i == 0 {
			h = hubtest.Start(t, hubtest.Options{Store: openPostgres(t, url), Sandboxes: o,
				Replica: &replica.Options{Heartbeat: 100 * time.Millisecond, TTL: 2 * time.Second}})
		} else {
			h = rs[0].ReplicaWith(openPostgres(t, url), func(ho *hubtest.Options) { ho.Sandboxes = o })
		}
		rs[i] = &sbReplica{Hub: h, t: t, hubID: g.hub, guard: g}
		rs[i].dial()
	}
	return rs[0], rs[1]
}

// dial connects the replica's client (again, after a restart).
func (r *sbReplica) dial() {
	cc, err := grpc.NewClient(r.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { cc.Close() })
	r.cc = cc
}

// restart stops the replica and serves it again with the same options.
func (r *sbReplica) restart() {
	r.Stop()
	r.Serve("127.0.0.1:0")
	r.dial()
}

// conv is the admin's context for the built-in environment's conversation.
func (r *sbReplica) conv(conv string) context.Context {
	return metadata.NewOutgoingContext(r.t.Context(), metadata.Pairs("authorization", "Bearer "+r.Token,
		"agentd-environment", "builtin", "agentd-conversation", conv))
}

// admin is the admin's context for the hub's own services.
func (r *sbReplica) admin() context.Context {
	return metadata.NewOutgoingContext(r.t.Context(), metadata.Pairs("authorization", "Bearer "+r.Token))
}

// sh runs a shell command in the conversation's sandbox through the
// replica: its output, and the sandbox that ran it.
func (r *sbReplica) sh(conv, command string) (string, string, error) {
	ctx := r.conv(conv)
	info, err := agentdv1.NewSystemServiceClient(r.cc).Info(ctx, &agentdv1.InfoRequest{})
	if err != nil {
		return "", "", err
	}
	st, err := agentdv1.NewProcessServiceClient(r.cc).Start(ctx, &agentdv1.StartRequest{Argv: []string{"sh", "-c", command}})
	if err != nil {
		return "", "", err
	}
	var out strings.Builder
	for {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out.String(), "", errors.New("no exit event")
		}
		if err != nil {
			return out.String(), "", err
		}
		out.Write(ev.GetEvent().GetOutput().GetData())
		if x := ev.GetEvent().GetExited(); x != nil {
			if x.GetExitCode() != 0 {
				return out.String(), "", fmt.Errorf("%q exited %d", command, x.GetExitCode())
			}
			return out.String(), info.GetTunnel().GetMachineId(), nil
		}
	}
}

// mustSh is sh failing the test on an error.
func (r *sbReplica) mustSh(conv, command string) (string, string) {
	r.t.Helper()
	out, id, err := r.sh(conv, command)
	if err != nil {
		r.t.Fatalf("%s: %s: %v", r.hubID, command, err)
	}
	return out, id
}

func (r *sbReplica) envs() hubv1.EnvironmentServiceClient {
	return hubv1.NewEnvironmentServiceClient(r.cc)
}

// ls is 'agentctl sandbox ls' on the replica: sandbox ID → online.
func (r *sbReplica) ls() map[string]bool {
	r.t.Helper()
	resp, err := r.envs().ListSandboxes(r.admin(), &hubv1.ListSandboxesRequest{})
	if err != nil {
		r.t.Fatalf("%s: list sandboxes: %v", r.hubID, err)
	}
	out := map[string]bool{}
	for _, sb := range resp.GetSandboxes() {
		out[sb.GetId()] = sb.GetOnline()
	}
	return out
}

// row returns the sandbox's row; ok false once it is gone.
func (r *sbReplica) row(id string) (store.Sandbox, bool) {
	r.t.Helper()
	sb, err := r.Store.Sandbox(r.t.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Sandbox{}, false
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return sb, true
}

// containerGone reports whether no container of the sandbox is left.
func containerGone(t *testing.T, drv sandbox.Driver, id string) bool {
	_, err := drv.Inspect(t.Context(), "agentd-"+id)
	return errors.Is(err, sandbox.ErrNotFound)
}

// A conversation's sandbox is reached the same from either replica, on the
// engine of the replica that made it: calls on the other are forwarded;
// two first calls racing on both make one sandbox; both list every
// sandbox; each warm pool is its replica's; one replica removes the
// other's sandbox, and the owner removes its container.
func TestSandboxesAcrossReplicas(t *testing.T) {
	a, b := sandboxReplicas(t, func(_ int, o *sandboxes.Options) { o.WarmBuiltin = 1 })
	if a.hubID == b.hubID || !strings.HasPrefix(a.Server.ReplicaID(), a.hubID+"/") || !strings.HasPrefix(b.Server.ReplicaID(), b.hubID+"/") {
		t.Fatalf("replica IDs %s and %s, hub IDs %s and %s: want each replica's ID to start with its own hub ID",
			a.Server.ReplicaID(), b.Server.ReplicaID(), a.hubID, b.hubID)
	}

	// c-1 starts on A; B reaches the same sandbox, /workspace and all.
	_, sb1 := a.mustSh("c-1", "echo from-a > /workspace/f")
	if got, _ := a.row(sb1); got.Hub != a.hubID {
		t.Fatalf("c-1's sandbox %s has hub %q, want A's %s", sb1, got.Hub, a.hubID)
	}
	out, via := b.mustSh("c-1", "cat /workspace/f")
	if via != sb1 || out != "from-a\n" {
		t.Errorf("c-1 through B: sandbox %s printed %q; want A's %s printing from-a", via, out, sb1)
	}

	// A's warm pool fills; B's first conversation does not take A's warm
	// sandbox, and B's own pool fills for its next one.
	warmOf := func(r *sbReplica) func() (bool, string) {
		return func() (bool, string) {
			sbs, err := r.Store.ListSandboxes(t.Context(), r.Org.ID)
			if err != nil {
				return false, err.Error()
			}
			for _, sb := range sbs {
				if sb.Warm && sb.Hub == r.hubID && r.ls()[sb.ID] {
					return true, sb.ID
				}
			}
			return false, fmt.Sprintf("%d sandboxes, none warm and online of %s", len(sbs), r.hubID)
		}
	}
	warmA := waitFor(t, 90*time.Second, "A's warm sandbox", warmOf(a))
	_, sbW := b.mustSh("c-w", "true")
	if got, _ := b.row(sbW); sbW == warmA || got.Hub != b.hubID {
		t.Errorf("c-w's first call on B got %s of hub %s; want a sandbox of B's own (not A's warm %s)", sbW, got.Hub, warmA)
	}
	if got, ok := a.row(warmA); !ok || !got.Warm {
		t.Errorf("A's warm sandbox %s after B's first call: %+v (present %v), want still warm", warmA, got, ok)
	}
	warmB := waitFor(t, 90*time.Second, "B's warm sandbox", warmOf(b))
	if _, sb := b.mustSh("c-w2", "true"); sb != warmB {
		t.Errorf("c-w2 on B got %s, want B's warm %s", sb, warmB)
	}

	// Two first calls for c-2 race on A and B: one sandbox, both run in it.
	var (
		wg  sync.WaitGroup
		ids [2]string
		err [2]error
	)
	for i, r := range []*sbReplica{a, b} {
		wg.Go(func() { _, ids[i], err[i] = r.sh("c-2", "true") })
	}
	wg.Wait()
	if err[0] != nil || err[1] != nil || ids[0] != ids[1] {
		t.Errorf("c-2 raced on A and B: sandboxes %q and %q (errors %v, %v); want one, both calls in it", ids[0], ids[1], err[0], err[1])
	}
	n := 0
	sbs, _ := a.Store.ListSandboxes(t.Context(), a.Org.ID)
	for _, sb := range sbs {
		if sb.Conversation == "c-2" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("c-2 has %d sandboxes, want 1", n)
	}

	// Both replicas list every sandbox, online.
	for _, r := range []*sbReplica{a, b} {
		got := r.ls()
		for _, id := range []string{sb1, sbW, ids[0], warmA} {
			if !got[id] {
				t.Errorf("sandbox ls on %s: %s online %v (listed %v); want it listed online", r.hubID, id, got[id], got)
			}
		}
	}

	// B removes A's sandbox: gone from both lists at once, A removes the
	// container (the guard fails the test if B touches it), and c-1's next
	// call starts afresh.
	if _, err := b.envs().RemoveSandbox(b.admin(), &hubv1.RemoveSandboxRequest{Id: sb1}); err != nil {
		t.Fatalf("sandbox rm %s on B: %v", sb1, err)
	}
	for _, r := range []*sbReplica{a, b} {
		if _, listed := r.ls()[sb1]; listed {
			t.Errorf("sandbox ls on %s after rm: %s still listed", r.hubID, sb1)
		}
	}
	waitFor(t, 30*time.Second, "A removes the container of the sandbox B removed", func() (bool, string) {
		return containerGone(t, a.guard.Driver, sb1), "still there"
	})
	if out, sb := b.mustSh("c-1", "cat /workspace/f 2>/dev/null || echo fresh"); sb == sb1 || out != "fresh\n" {
		t.Errorf("c-1 after its sandbox was removed: %s printed %q; want a new sandbox, fresh", sb, out)
	}
}

// A replica's idle reaper leaves the other's sandboxes alone; a replica
// that is not running fails the calls for its sandboxes (UNAVAILABLE,
// saying so), and no other sandbox is made; back (same hub ID), the
// conversation goes on in the same sandbox; a sandbox removed while its
// replica was down has its container removed when the replica is back.
func TestSandboxReplicaDown(t *testing.T) {
	a, b := sandboxReplicas(t, func(i int, o *sandboxes.Options) {
		if i == 1 {
			o.DeleteAfter = time.Second // B's reaper runs every 250 ms
		}
	})
	_, sb1 := a.mustSh("c-1", "echo kept > /workspace/f")
	_, sbB := b.mustSh("c-b", "true")

	// B reaps its own idle sandbox, and only its own.
	waitFor(t, 30*time.Second, "B reaps its idle sandbox", func() (bool, string) {
		_, ok := b.row(sbB)
		return !ok, "still there"
	})
	if _, ok := a.row(sb1); !ok || containerGone(t, a.guard.Driver, sb1) {
		t.Fatalf("A's sandbox %s after B's reaper ran: row %v, container gone %v", sb1, ok, containerGone(t, a.guard.Driver, sb1))
	}

	// A is down: c-1's calls on B fail saying why; nothing else is made.
	a.Stop()
	_, _, err := b.sh("c-1", "true")
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "not running") || !strings.Contains(err.Error(), "agentctl sandbox rm "+sb1) {
		t.Errorf("c-1 on B with A down: %v; want UNAVAILABLE saying A is not running and how to start afresh", err)
	}
	if sb, err := b.Store.ConversationSandbox(t.Context(), b.Org.ID, "builtin", "c-1"); err != nil || sb.ID != sb1 {
		t.Errorf("c-1's sandbox with A down: %+v, %v; want still %s", sb, err, sb1)
	}

	// A is back with the same hub ID: c-1 goes on where it was.
	a.restart()
	if !strings.HasPrefix(a.Server.ReplicaID(), a.hubID+"/") {
		t.Errorf("A restarted as replica %s, want its hub ID %s kept", a.Server.ReplicaID(), a.hubID)
	}
	if out, sb := b.mustSh("c-1", "cat /workspace/f"); sb != sb1 || out != "kept\n" {
		t.Errorf("c-1 on B after A is back: %s printed %q; want %s printing kept", sb, out, sb1)
	}

	// Removed on B while A is down: A removes the container once back.
	a.Stop()
	if _, err := b.envs().RemoveSandbox(b.admin(), &hubv1.RemoveSandboxRequest{Id: sb1}); err != nil {
		t.Fatalf("sandbox rm on B with A down: %v", err)
	}
	if containerGone(t, a.guard.Driver, sb1) {
		t.Fatal("B removed A's container")
	}
	a.restart()
	waitFor(t, 30*time.Second, "A, back, removes the container of its removed sandbox", func() (bool, string) {
		return containerGone(t, a.guard.Driver, sb1), "still there"
	})
}

// waitFor polls cond every 100 ms until it holds and returns its word,
// failing the test with its last word after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() (bool, string)) string {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, word := cond()
		if ok {
			return word
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %s", what, d, word)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("%s: %v", what, t.Context().Err())
		case <-tick.C:
		}
	}
}

// A custom environment validated on A (its image pulled on A's engine)
// runs on B, whose engine lacks the image: B pulls it by its pinned digest.
func TestSandboxCustomImageAcrossReplicas(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	a, b := sandboxReplicas(t, func(_ int, o *sandboxes.Options) {
		o.ImageCheck.AllowRegistries = []string{host}
		o.ImageCheck.Insecure = func(h string) bool { return h == host }
	})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM "+sandboxtest.BaseImage(t)+"\nLABEL test.replica=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ref := host + "/acme/replica:v1"
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "--force", ref).Run() })
	dockerCLI(t, "build", "-q", "-t", ref, dir)
	dockerCLI(t, "push", "-q", ref)

	if _, err := a.envs().CreateEnvironment(a.admin(), &hubv1.CreateEnvironmentRequest{Name: "custom", Image: ref, Network: "none"}); err != nil {
		t.Fatal(err)
	}
	pinned := waitFor(t, 4*time.Minute, "environment custom validated on A", func() (bool, string) {
		resp, err := a.envs().GetEnvironment(a.admin(), &hubv1.GetEnvironmentRequest{Name: "custom"})
		if err != nil {
			return false, err.Error()
		}
		e := resp.GetEnvironment()
		if e.GetState() == hubv1.EnvironmentState_ENVIRONMENT_STATE_READY && e.GetPinned() != "" {
			return true, e.GetPinned()
		}
		return false, e.GetState().String() + " " + e.GetReason()
	})
	// B's engine has not got it: gone from the one engine here.
	dockerCLI(t, "rmi", "--force", ref, pinned)
	if _, err := b.guard.Image(t.Context(), pinned); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("image %s after rmi: %v, want ErrNotFound", pinned, err)
	}

	ctx := metadata.NewOutgoingContext(t.Context(), metadata.Pairs("authorization", "Bearer "+b.Token,
		"agentd-environment", "custom", "agentd-conversation", "c-1"))
	info, err := agentdv1.NewSystemServiceClient(b.cc).Info(ctx, &agentdv1.InfoRequest{})
	if err != nil {
		t.Fatalf("a call on B for the environment A validated: %v", err)
	}
	if sb, _ := b.row(info.GetTunnel().GetMachineId()); sb.Hub != b.hubID || sb.Image != pinned {
		t.Errorf("c-1's sandbox on B: %+v; want hub %s running %s", sb, b.hubID, pinned)
	}
}

func dockerCLI(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "docker", args...)
	cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// A replica that runs sandboxes needs a hub ID of its own, and a valid
// one: hub.New refuses, and says so, before it touches the engine.
func TestSandboxReplicaNeedsHubID(t *testing.T) {
	st, err := store.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "hub.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, tc := range []struct {
		name, hubID, want string
	}{
		{"none", "", "needs its own SandboxOptions.HubID"},
		{"a slash", "hub/a", "want 1 to 40 letters"},
		{"too long", strings.Repeat("h", 41), "want 1 to 40 letters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := hub.New(t.Context(), hub.Options{Store: st, Replica: &replica.Options{},
				Sandboxes: sandboxes.Options{Driver: struct{ sandbox.Driver }{}, HubID: tc.hubID, AgentdDir: t.TempDir(), SocketDir: t.TempDir()}})
			if err == nil {
				srv.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("hub.New with hub ID %q: %v; want an error saying %q", tc.hubID, err, tc.want)
			}
		})
	}
}
