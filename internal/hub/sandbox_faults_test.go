package hub_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// The lifecycle and fault tests of sandboxes run real hubs on this
// machine's Docker engine. They are not parallel: they share the engine,
// and several of them kill or starve containers on purpose.

// info asks the sandbox behind ctx who it is.
func (h *sandboxHub) info(ctx context.Context) (*agentdv1.InfoResponse, error) {
	return agentdv1.NewSystemServiceClient(h.cc).Info(ctx, &agentdv1.InfoRequest{})
}

// sandboxOf returns the id of the sandbox that ctx's calls reach.
func (h *sandboxHub) sandboxOf(ctx context.Context) string {
	h.t.Helper()
	info, err := h.info(ctx)
	if err != nil {
		h.t.Fatalf("info: %v", err)
	}
	return info.GetTunnel().GetMachineId()
}

// byID is the admin's context routed to one machine or sandbox by id.
func (h *sandboxHub) byID(id string) context.Context {
	return metadata.NewOutgoingContext(h.t.Context(), metadata.Pairs("authorization", "Bearer "+h.Token, "agentd-machine", id))
}

// listSandboxes lists the org's sandboxes.
func (h *sandboxHub) listSandboxes() []*hubv1.Sandbox {
	h.t.Helper()
	list, err := hubv1.NewEnvironmentServiceClient(h.cc).ListSandboxes(h.ctx("", ""), &hubv1.ListSandboxesRequest{})
	if err != nil {
		h.t.Fatalf("list sandboxes: %v", err)
	}
	return list.GetSandboxes()
}

// start starts argv and returns the stream once the process has started,
// with its process id.
func (h *sandboxHub) start(ctx context.Context, req *agentdv1.StartRequest) (agentdv1.ProcessService_StartClient, string) {
	h.t.Helper()
	st, err := agentdv1.NewProcessServiceClient(h.cc).Start(ctx, req)
	if err != nil {
		h.t.Fatalf("start %v: %v", req.GetArgv(), err)
	}
	r, err := st.Recv()
	if err != nil {
		h.t.Fatalf("start %v: %v", req.GetArgv(), err)
	}
	started := r.GetEvent().GetStarted()
	if started == nil {
		h.t.Fatalf("start %v: first event %v, want started", req.GetArgv(), r.GetEvent())
	}
	return st, started.GetId()
}

// untilExit reads a process's events until it exits: its output and exit.
func untilExit(recv func() (*agentdv1.ProcessEvent, error)) (string, *agentdv1.Exited, error) {
	var out strings.Builder
	for {
		ev, err := recv()
		if err != nil {
			return out.String(), nil, err
		}
		if o := ev.GetOutput(); o != nil {
			out.Write(o.GetData())
		}
		if x := ev.GetExited(); x != nil {
			return out.String(), x, nil
		}
	}
}

func startEvents(st agentdv1.ProcessService_StartClient) func() (*agentdv1.ProcessEvent, error) {
	return func() (*agentdv1.ProcessEvent, error) {
		r, err := st.Recv()
		if err != nil {
			return nil, err
		}
		return r.GetEvent(), nil
	}
}

func attachEvents(st agentdv1.ProcessService_AttachClient) func() (*agentdv1.ProcessEvent, error) {
	return func() (*agentdv1.ProcessEvent, error) {
		r, err := st.Recv()
		if err != nil {
			return nil, err
		}
		return r.GetEvent(), nil
	}
}

// pollUntil polls cond every 100 ms until it holds, failing the test with
// cond's last word after d.
func pollUntil(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %s", what, d, why)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("%s: %v", what, t.Context().Err())
		case <-tick.C:
		}
	}
}

// assertGone fails unless the sandbox's container and workspace (volume,
// claim) are gone from the engine.
func (h *sandboxHub) assertGone(id, containerID string) {
	h.t.Helper()
	if containerID == "" {
		containerID = "agentd-" + id
	}
	if _, err := h.driver.Inspect(h.t.Context(), containerID); !errors.Is(err, sandbox.ErrNotFound) {
		h.t.Errorf("sandbox %s's container: %v, want ErrNotFound", id, err)
	}
	if h.hasWorkspace(id) {
		h.t.Errorf("sandbox %s's workspace is still there", id)
	}
}

// randomLower returns n lowercase letters and digits.
func randomLower(n int) string {
	const alphabet = "abcdefghijkmnpqrstuvwxyz23456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[b[i]&31]
	}
	return string(b)
}

// startOrphan makes, with the driver directly, a running container of
// image and limits that carries hubID's labels but that no hub knows: what
// a hub that crashed between making a container and recording it leaves
// behind.
func startOrphan(t *testing.T, drv sandbox.Driver, hubID, image string, limits sandbox.Limits) string {
	t.Helper()
	id := "sb-orphan" + randomLower(8)
	name := "agentd-" + id
	t.Cleanup(func() { _ = drv.Remove(context.Background(), name) })
	cid, err := drv.Create(t.Context(), sandbox.Spec{
		Name:  name,
		Image: image,
		Labels: map[string]string{
			sandbox.LabelManaged: "1", sandbox.LabelHub: hubID, sandbox.LabelID: id,
		},
		Cmd:     []string{"sleep", "300"},
		Network: "none",
		Limits:  limits,
	})
	if err != nil {
		t.Fatalf("orphan: %v", err)
	}
	if err := drv.Start(t.Context(), cid); err != nil {
		t.Fatalf("orphan: %v", err)
	}
	return id
}

// A hub restart: the conversation reaches the same sandbox (same id, same
// container, its workspace kept); a container with the hub's labels that
// no row knows, and a sandbox whose row was deleted behind the hub's back,
// are removed with their volumes; so is a workspace volume left without
// its container and its row.
func TestSandboxRestart(t *testing.T) {
	h := startSandboxHub(t, nil)
	ctx := h.ctx("builtin", "c-1")
	if out, code, err := h.run(ctx, "sh", "-c", "echo kept > /workspace/f"); err != nil || code != 0 {
		t.Fatalf("write: %q exit %d %v", out, code, err)
	}
	id := h.sandboxOf(ctx)
	sb, err := h.Store.Sandbox(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	in, err := h.driver.Inspect(t.Context(), sb.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	hubID := in.Labels[sandbox.LabelHub]
	if hubID == "" || hubID != sb.Hub {
		t.Fatalf("hub id: label %q, row %q", hubID, sb.Hub)
	}

	orphanID := h.orphan(h.driver, hubID)
	// A sandbox the store forgot: its container is an orphan too.
	forgotten := h.sandboxOf(h.ctx("builtin", "c-forgotten"))
	fsb, err := h.Store.Sandbox(t.Context(), forgotten)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.driver.Remove(context.Background(), fsb.ContainerID) })
	if err := h.Store.DeleteSandbox(t.Context(), forgotten); err != nil {
		t.Fatal(err)
	}

	// A workspace whose container and row are gone: a removal whose answer
	// was lost after the engine removed the container.
	lost := h.sandboxOf(h.ctx("builtin", "c-lost"))
	lsb, err := h.Store.Sandbox(t.Context(), lost)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.driver.Remove(context.Background(), "agentd-"+lost) })

	h.Stop()
	if _, err := h.driver.Inspect(t.Context(), sb.ContainerID); err != nil {
		t.Fatalf("the sandbox's container after the hub stopped: %v", err)
	}
	h.removeContainer(lsb.ContainerID)
	if err := h.Store.DeleteSandbox(t.Context(), lost); err != nil {
		t.Fatal(err)
	}
	if !h.hasWorkspace(lost) {
		t.Fatal("removing the container removed its workspace: the case is not set up")
	}
	h.Serve(h.Addr)
	// Reconciling is part of the start: the orphans are gone now.
	h.assertGone(orphanID, "")
	h.assertGone(forgotten, fsb.ContainerID)
	h.assertGone(lost, lsb.ContainerID)

	info, err := h.info(h.ctx("builtin", "c-1"))
	if err != nil {
		t.Fatalf("info after the restart: %v", err)
	}
	if got := info.GetTunnel().GetMachineId(); got != id {
		t.Errorf("after the restart c-1 reached %s, want its sandbox %s", got, id)
	}
	if out, _, err := h.run(h.ctx("builtin", "c-1"), "cat", "/workspace/f"); err != nil || out != "kept\n" {
		t.Errorf("workspace after the restart: %q %v, want kept", out, err)
	}
	sb2, err := h.Store.Sandbox(t.Context(), id)
	if err != nil || sb2.ContainerID != sb.ContainerID {
		t.Errorf("row after the restart: container %q %v, want %q", sb2.ContainerID, err, sb.ContainerID)
	}
}

// The warm pool: after the org's first conversation a warm sandbox starts
// (no conversation), the next conversation gets exactly that one, and the
// pool refills; under each isolation, the pool's sandboxes of the
// environment's.
func TestSandboxWarmPool(t *testing.T) {
	isolations(t, func(o *sandboxes.Options) { o.WarmBuiltin = 1 }, sandboxWarmPool)
}

func sandboxWarmPool(t *testing.T, iso string, h *sandboxHub) {
	first := h.sandboxOf(h.ctx("builtin", "c-1"))
	refillWait := 30 * time.Second
	if h.kube != nil {
		refillWait = 3 * time.Minute // a Pod, its sandbox and agentd's tunnel: slower than a container
	}
	warmOne := func(not ...string) string {
		var id string
		pollUntil(t, refillWait, "a warm sandbox", func() (bool, string) {
			var seen []string
			for _, sb := range h.listSandboxes() {
				seen = append(seen, fmt.Sprintf("%s conv %q %s", sb.GetId(), sb.GetConversation(), sb.GetState()))
				if sb.GetConversation() == "" && sb.GetState() == "running" && sb.GetOnline() && !slices.Contains(not, sb.GetId()) {
					id = sb.GetId()
					return true, ""
				}
			}
			return false, strings.Join(seen, "; ")
		})
		return id
	}
	warm := warmOne(first)
	t0 := time.Now()
	second := h.sandboxOf(h.ctx("builtin", "c-2"))
	took := time.Since(t0)
	if second != warm {
		t.Fatalf("c-2 got %s, want the warm sandbox %s", second, warm)
	}
	t.Logf("c-2's first call from the warm pool took %s", took)
	var convs []string
	for _, sb := range h.listSandboxes() {
		if sb.GetId() == warm {
			convs = append(convs, sb.GetConversation())
		}
	}
	if len(convs) != 1 || convs[0] != "c-2" {
		t.Errorf("the claimed sandbox is listed with conversations %q, want [c-2]", convs)
	}
	refill := warmOne(first, warm)
	if n := len(h.listSandboxes()); n != 3 {
		t.Errorf("%d sandboxes, want 3 (c-1, c-2 and the refilled warm %s)", n, refill)
	}
	// The claimed sandbox works for its conversation, on the isolation's
	// kernel.
	if out, code, err := h.run(h.ctx("builtin", "c-2"), "echo", "ok"); err != nil || code != 0 || out != "ok\n" {
		t.Errorf("c-2: %q exit %d %v", out, code, err)
	}
	h.checkKernel(t, h.ctx("builtin", "c-2"), iso)
}

// A sandbox's container killed under a running command: the command's
// stream ends with an error, not an exit, and the conversation's next call
// gets a new, working sandbox; the dead one is removed.
func TestSandboxKilledUnderCommand(t *testing.T) {
	h := startSandboxHub(t, nil)
	ctx := h.ctx("builtin", "c-1")
	id := h.sandboxOf(ctx)
	sb, err := h.Store.Sandbox(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if _, code, err := h.run(ctx, "sh", "-c", "echo kept > /workspace/f"); err != nil || code != 0 {
		t.Fatalf("writing a file: exit %d %v", code, err)
	}
	st, _ := h.start(ctx, &agentdv1.StartRequest{Argv: []string{"sleep", "300"}})
	h.killContainer(sb.ContainerID)
	errc := make(chan error, 1)
	var x *agentdv1.Exited
	go func() {
		var err error
		_, x, err = untilExit(startEvents(st))
		errc <- err
	}()
	select {
	case err = <-errc:
	case <-time.After(30 * time.Second):
		t.Fatal("the command's stream did not end within 30 s of its container being killed")
	}
	if err == nil {
		t.Fatalf("the command of a killed sandbox reported an exit: %v", x)
	}
	// The client is told that the sandbox's container died under the
	// command, and why, not just that the tunnel broke.
	if st, _ := status.FromError(err); st.Code() != codes.Unavailable ||
		!strings.Contains(st.Message(), "sandbox "+id+" stopped under the call: its container was killed") {
		t.Errorf("the client saw %v, want Unavailable: sandbox %s stopped under the call: its container was killed …", err, id)
	}

	// The conversation's next call starts the same sandbox again: no data
	// lost from /workspace.
	next := h.ctx("builtin", "c-1")
	out, code, err := h.run(next, "cat", "/workspace/f")
	if err != nil || code != 0 || out != "kept\n" {
		t.Fatalf("the next call: %q exit %d %v, want the same sandbox started again with /workspace/f", out, code, err)
	}
	if got := h.sandboxOf(next); got != id {
		t.Errorf("the next call reached %s, want %s started again", got, id)
	}
	if in, err := h.driver.Inspect(t.Context(), sb.ContainerID); err != nil || in.State != sandbox.StateRunning {
		t.Errorf("the container after: %+v %v, want it running again", in, err)
	}
}

// sockProxy forwards a unix socket (or a TCP port) to another: an engine
// that comes back.
type sockProxy struct {
	lis   net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

// startProxy forwards connections to at (on network: unix, tcp) to to.
func startProxy(t *testing.T, network, at, to string) *sockProxy {
	t.Helper()
	lis, err := net.Listen(network, at)
	if err != nil {
		t.Fatal(err)
	}
	p := &sockProxy{lis: lis}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial(network, to)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); _, _ = io.Copy(u, c); u.Close() }()
			go func() { defer p.wg.Done(); _, _ = io.Copy(c, u); c.Close() }()
		}
	}()
	t.Cleanup(p.Close)
	return p
}

// engineSocket is the path of the local engine's unix socket.
func engineSocket(t *testing.T) string {
	t.Helper()
	host := os.Getenv("DOCKER_HOST")
	switch {
	case host == "":
		return "/var/run/docker.sock"
	case strings.HasPrefix(host, "unix://"):
		return strings.TrimPrefix(host, "unix://")
	}
	t.Skipf("the engine is at %s, not on a unix socket this test can forward", host)
	return ""
}

func (p *sockProxy) Close() {
	p.lis.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// The engine gone: calls to the built-in environment fail UNAVAILABLE
// naming the engine's address; once the engine answers again, calls work
// and the hub finds its sandboxes again (an orphan of its id is removed)
// without a restart. On Kubernetes the engine is the API server.
func TestSandboxEngineGone(t *testing.T) {
	hubID := "hub-faults-" + randomLower(8)
	var (
		orphanID string
		engine   *engineCut
	)
	h := startSandboxHubOn(t, func(h *sandboxHub, o *sandboxes.Options) {
		engine = h.cutEngine()
		// Made on the engine before the hub starts, which cannot see it.
		orphanID = h.orphan(h.driver, hubID)
		o.Driver = engine.drv
		o.HubID = hubID
		o.DeleteAfter = 2 * time.Second // removed when idle; the background work ticks every 500 ms
	})

	_, err := h.info(h.ctx("builtin", "c-1"))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), engine.addr) {
		t.Fatalf("a call while the engine is gone: %v, want Unavailable naming %s", err, engine.addr)
	}
	t.Logf("the client saw: %v", err)
	if _, err := h.driver.Inspect(t.Context(), "agentd-"+orphanID); err != nil {
		t.Fatalf("the orphan before the engine is back: %v", err)
	}

	engine.restore()
	out, code, err := h.run(h.ctx("builtin", "c-1"), "echo", "ok")
	if err != nil || code != 0 || out != "ok\n" {
		t.Fatalf("a call once the engine is back: %q exit %d %v", out, code, err)
	}
	pollUntil(t, h.within(10*time.Second), "the orphan removed once the engine is back", func() (bool, string) {
		_, err := h.driver.Inspect(t.Context(), "agentd-"+orphanID)
		return errors.Is(err, sandbox.ErrNotFound), fmt.Sprintf("inspect: %v", err)
	})

	// A sandbox the delete policy removes while the engine is gone loses
	// its row at once and its container once the engine is back.
	id := h.sandboxOf(h.ctx("builtin", "c-2"))
	sb, err := h.Store.Sandbox(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.driver.Remove(context.Background(), sb.ContainerID) })
	engine.cut()
	pollUntil(t, h.within(10*time.Second), "the idle sandbox reaped while the engine is gone", func() (bool, string) {
		_, err := h.Store.Sandbox(t.Context(), id)
		return errors.Is(err, store.ErrNotFound), fmt.Sprintf("row: %v", err)
	})
	if _, err := h.driver.Inspect(t.Context(), sb.ContainerID); err != nil {
		t.Fatalf("the reaped sandbox's container while the engine is gone: %v, want it still there", err)
	}
	engine.restore()
	pollUntil(t, h.within(10*time.Second), "the reaped sandbox's container removed once the engine is back", func() (bool, string) {
		_, err := h.driver.Inspect(t.Context(), sb.ContainerID)
		return errors.Is(err, sandbox.ErrNotFound), fmt.Sprintf("inspect: %v", err)
	})
	// Everything of this hub goes (c-1's sandbox, reaped meanwhile, too),
	// workspaces included.
	hub := map[string]string{sandbox.LabelHub: hubID}
	pollUntil(t, h.within(10*time.Second), "every container and workspace of the hub removed", func() (bool, string) {
		infos, err := h.driver.List(t.Context(), hub)
		if err != nil || len(infos) > 0 {
			return false, fmt.Sprintf("%d containers left (%v)", len(infos), err)
		}
		vols, err := h.driver.Volumes(t.Context(), hub)
		return err == nil && len(vols) == 0, fmt.Sprintf("workspaces left: %v %v", vols, err)
	})
}

// Limits: a memory hog and a fork bomb in a sandbox fail (killed, or
// refused forks), and the sandbox's agentd survives both: the same
// process, the same sandbox, its tunnel online, commands run again.
func TestSandboxLimits(t *testing.T) {
	h := startSandboxHub(t, func(o *sandboxes.Options) {
		o.Limits = sandbox.Limits{CPUs: 1, MemoryBytes: 256 << 20, Pids: 128, TmpBytes: 64 << 20, HomeBytes: 64 << 20}
	})
	ctx := h.ctx("builtin", "c-1")
	before, err := h.info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := before.GetTunnel().GetMachineId()
	sb, err := h.Store.Sandbox(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	cin, err := h.driver.Inspect(t.Context(), sb.ContainerID)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name    string
		argv    []string
		timeout time.Duration
		reason  string // the exit's reason, from the cgroup's counters
	}{
		{"memory hog", []string{"python3", "-c", "b=[]\nwhile True: b.append(bytearray(10<<20))"}, 30 * time.Second, "out of memory (limit 256 MiB)"},
		// The shell exits at its first refused fork; its sleeps hold
		// the pids they have for 30 s.
		{"fork bomb", []string{"sh", "-c", "for i in $(seq 1 500); do sleep 30 & done; wait"}, 5 * time.Second, "pids limit (128) reached"},
	} {
		st, _ := h.start(h.ctx("builtin", "c-1"), &agentdv1.StartRequest{Argv: tc.argv, Timeout: durationpb.New(tc.timeout)})
		out, x, err := untilExit(startEvents(st))
		if err != nil {
			t.Fatalf("%s: the stream failed (the sandbox went down?): %v", tc.name, err)
		}
		t.Logf("%s: exit %d signal %q timed out %v; output %q", tc.name, x.GetExitCode(), x.GetSignal(), x.GetTimedOut(), lastLine(out))
		if x.GetExitCode() == 0 {
			t.Errorf("%s: exit 0, want a failure", tc.name)
		}
		if x.GetReason() != tc.reason {
			t.Errorf("%s: exit reason %q, want %q", tc.name, x.GetReason(), tc.reason)
		}
		if tc.name == "memory hog" && x.GetTimedOut() {
			t.Errorf("memory hog: ran until its timeout, want the memory limit to stop it")
		}

		if tc.name == "fork bomb" {
			// While the bomb's sleeps hold every pid, a burst of calls:
			// agentd serves them on the threads it made at start (a
			// thread it cannot create would kill it). Calls that need a
			// new process may fail; agentd must not.
			var wg sync.WaitGroup
			for range 100 {
				wg.Go(func() {
					_, _ = h.info(h.ctx("builtin", "c-1"))
					_, _ = agentdv1.NewProcessServiceClient(h.cc).List(h.ctx("builtin", "c-1"), &agentdv1.ProcessServiceListRequest{})
				})
			}
			wg.Wait()
		}
		after, err := h.info(h.ctx("builtin", "c-1"))
		if err != nil {
			t.Fatalf("%s: info after: %v", tc.name, err)
		}
		if after.GetTunnel().GetMachineId() != id || !after.GetStarted().AsTime().Equal(before.GetStarted().AsTime()) {
			t.Errorf("%s: after it, sandbox %s agentd started %v; want %s, the same agentd started %v", tc.name,
				after.GetTunnel().GetMachineId(), after.GetStarted().AsTime(), id, before.GetStarted().AsTime())
		}
		// Commands run again once the limit's victims are gone.
		pollUntil(t, 20*time.Second, tc.name+": a command runs after it", func() (bool, string) {
			out, code, err := h.run(h.ctx("builtin", "c-1"), "echo", "ok")
			return err == nil && code == 0 && out == "ok\n", fmt.Sprintf("%q exit %d %v", out, code, err)
		})
	}
	cafter, err := h.driver.Inspect(t.Context(), sb.ContainerID)
	if err != nil || cafter.State != sandbox.StateRunning || !cafter.StartedAt.Equal(cin.StartedAt) {
		t.Errorf("container after: %s started %v %v; want running since %v", cafter.State, cafter.StartedAt, err, cin.StartedAt)
	}
	for _, sb := range h.listSandboxes() {
		if sb.GetId() == id && !sb.GetOnline() {
			t.Errorf("sandbox %s is listed offline", id)
		}
	}
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// Activity and Attach work on sandboxes as on machines: the command shows
// in the org's activity under the sandbox's id with its command line, and
// Attach from offset 0 after the Start stream was cancelled replays the
// output and the exit.
func TestSandboxActivityAndAttach(t *testing.T) {
	h := startSandboxHub(t, nil)
	ctx := h.ctx("builtin", "c-1")
	id := h.sandboxOf(ctx)
	marker := "marker-" + randomLower(6)

	sctx, cancel := context.WithCancel(ctx)
	st, pid := h.start(sctx, &agentdv1.StartRequest{Argv: []string{"sh", "-c", "echo first " + marker + "; sleep 1; echo second"}})
	// Read the first output, then walk away.
	for {
		r, err := st.Recv()
		if err != nil {
			t.Fatalf("start: %v", err)
		}
		if o := r.GetEvent().GetOutput(); o != nil {
			break
		}
	}
	cancel()

	at, err := agentdv1.NewProcessServiceClient(h.cc).Attach(h.ctx("builtin", "c-1"), &agentdv1.AttachRequest{Id: pid, FromOffset: 0})
	if err != nil {
		t.Fatal(err)
	}
	out, x, err := untilExit(attachEvents(at))
	if err != nil || x.GetExitCode() != 0 || out != "first "+marker+"\nsecond\n" {
		t.Errorf("attach: %q %v %v; want both lines and exit 0", out, x, err)
	}

	acts := hubv1.NewActivityServiceClient(h.cc)
	pollUntil(t, 10*time.Second, "the command in the org's activity", func() (bool, string) {
		w, err := acts.Watch(h.ctx("", ""), &hubv1.WatchRequest{MachineId: id, Tail: 1000, NoFollow: true})
		if err != nil {
			return false, err.Error()
		}
		var kinds []string
		start, exit := false, false
		for {
			r, err := w.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return false, err.Error()
			}
			rec := r.GetRecord()
			kinds = append(kinds, rec.GetKind())
			if r.GetMachineId() != id || !strings.Contains(rec.GetCommand(), marker) {
				continue
			}
			switch rec.GetKind() {
			case "process.start":
				// The sandbox's account: the actor it names is its claim.
				start = rec.GetConversation() == "c-1" && rec.GetClaimedActor() != "" && r.GetSource() == "daemon"
			case "process.exit":
				exit = rec.GetExitCode() == 0
			}
		}
		return start && exit, fmt.Sprintf("records %v (start %v exit %v)", kinds, start, exit)
	})
}
