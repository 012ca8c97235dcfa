package hub_test

// The hub's benchmarks (issue 4): exec round trip and stdout throughput of a
// real daemon reached through a real hub and tunnel, and the hub's cost of
// many idle tunnels plus their reconnect time after a hub restart.
//
//	go test -run '^$' -bench . -benchtime 2s ./internal/hub/
//	AGENTD_BENCH_TUNNELS=1000 go test -run '^TestIdleTunnels$' -v ./internal/hub/
//
// scripts/bench-hub.sh runs them next to agentctl and ssh. The e2e harness
// (startHub, startMachine) takes a *testing.T, so benchmarks use the
// testing.TB variant below; it builds the hub and daemon the same way.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/devdepot-ai/agentd/agentd"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
	"github.com/devdepot-ai/agentd/transport"
)

// benchHub is a hub on a loopback port with a SQLite store, an org and an
// admin token of it; restartable on the same address.
type benchHub struct {
	tb    testing.TB
	hub   *hubtest.Hub
	store store.Store
	org   store.Org
	token string
	addr  string
	url   string
	stop  func()
}

func newBenchHub(tb testing.TB, log *zap.Logger) *benchHub {
	tb.Helper()
	// Every daemon of a benchmark dials from 127.0.0.1: no per-client cap.
	hb := hubtest.Start(tb, hubtest.Options{Org: "bench", Actor: "bench", Logger: log, MaxConnsPerClient: -1})
	h := &benchHub{tb: tb, hub: hb, store: hb.Store, org: hb.Org, token: hb.Token}
	h.sync()
	return h
}

// serve starts a hub on addr; after stop, the same address again is a restart.
func (h *benchHub) serve(addr string) {
	h.tb.Helper()
	h.hub.Serve(addr)
	h.sync()
}

func (h *benchHub) sync() { h.addr, h.url, h.stop = h.hub.Addr, h.hub.URL, h.hub.Stop }

func (h *benchHub) conn() *grpc.ClientConn {
	cc, err := grpc.NewClient(h.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		h.tb.Fatal(err)
	}
	h.tb.Cleanup(func() { cc.Close() })
	return cc
}

// tunnels is the hub's agenthub_tunnels gauge (-1 when it cannot be read).
func (h *benchHub) tunnels(c *http.Client) int {
	req, err := http.NewRequest(http.MethodGet, h.url+"/metrics", nil)
	if err != nil {
		return -1
	}
	req.Header.Set("Authorization", "Bearer "+h.token) // the owner's
	resp, err := c.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "agenthub_tunnels "); ok {
			n, err := strconv.Atoi(v)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// startDaemon pairs a real agentd with the hub and runs it in this process
// (tunnel, gRPC server, runner); it returns the machine id once the hub
// routes calls to it.
func (h *benchHub) startDaemon() string {
	h.tb.Helper()
	cc := h.conn()
	code, err := hubv1.NewAdminServiceClient(cc).CreatePairingCode(authCtx(h.tb.Context(), h.token, ""), &hubv1.CreatePairingCodeRequest{})
	if err != nil {
		h.tb.Fatal(err)
	}
	dir := h.tb.TempDir()
	cfg, ws := filepath.Join(dir, "config"), filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		h.tb.Fatal(err)
	}
	m, err := agentd.Pair(h.tb.Context(), agentd.PairOptions{Hub: h.url, Code: code.GetCode(), ConfigDir: cfg, Name: "bench"})
	if err != nil {
		h.tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- agentd.Run(ctx, agentd.RunOptions{
			Server:    agentd.Options{Workspace: ws, StateDir: filepath.Join(dir, "state"), Env: os.Environ(), Logger: zap.NewNop()},
			ConfigDir: cfg, Socket: "-",
			Backoff: transport.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond, Rejected: time.Hour},
		})
	}()
	h.tb.Cleanup(func() { cancel(); <-done })
	sys := agentdv1.NewSystemServiceClient(cc)
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := sys.Info(authCtx(h.tb.Context(), h.token, m.MachineID), &agentdv1.InfoRequest{})
		if err == nil {
			return m.MachineID
		}
		if time.Now().After(deadline) {
			h.tb.Fatalf("machine %s not reachable through the hub: %v", m.MachineID, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startThroughHub starts req on the machine through the hub and reads its
// events until Exited; it returns the stdout bytes received.
func startThroughHub(ctx context.Context, c agentdv1.ProcessServiceClient, req *agentdv1.StartRequest) (int64, *agentdv1.Exited, error) {
	st, err := c.Start(ctx, req)
	if err != nil {
		return 0, nil, err
	}
	var n int64
	for {
		resp, err := st.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("stream ended without an exited event")
			}
			return n, nil, err
		}
		ev := resp.GetEvent()
		if o := ev.GetOutput(); o != nil && o.GetStream() == agentdv1.OutputStream_OUTPUT_STREAM_STDOUT {
			n += int64(len(o.GetData()))
		}
		if x := ev.GetExited(); x != nil {
			return n, x, nil
		}
	}
}

func reportPercentiles(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	b.ReportMetric(ms(percentile(ds, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(ds, 0.99)), "p99-ms")
}

// BenchmarkHubExecTrue is the round trip of Start ["true"] until Exited,
// from a gRPC client of the hub through the tunnel to a real daemon.
func BenchmarkHubExecTrue(b *testing.B) {
	h := newBenchHub(b, zap.NewNop())
	id := h.startDaemon()
	c := agentdv1.NewProcessServiceClient(h.conn())
	ctx := authCtx(b.Context(), h.token, id)
	req := &agentdv1.StartRequest{Argv: []string{"true"}}
	for range 5 { // warm up
		if _, x, err := startThroughHub(ctx, c, req); err != nil || x.GetExitCode() != 0 {
			b.Fatalf("true through the hub: %v %v", x, err)
		}
	}
	var ds []time.Duration
	for b.Loop() {
		t0 := time.Now()
		_, x, err := startThroughHub(ctx, c, req)
		ds = append(ds, time.Since(t0))
		if err != nil || x.GetExitCode() != 0 {
			b.Fatalf("true through the hub: %v %v", x, err)
		}
	}
	reportPercentiles(b, ds)
}

// BenchmarkHubStdout streams 256 MiB of a command's stdout through the hub.
func BenchmarkHubStdout(b *testing.B) {
	const size = 256 << 20
	h := newBenchHub(b, zap.NewNop())
	id := h.startDaemon()
	c := agentdv1.NewProcessServiceClient(h.conn())
	ctx := authCtx(b.Context(), h.token, id)
	req := &agentdv1.StartRequest{Argv: []string{"head", "-c", strconv.Itoa(size), "/dev/zero"}}
	run := func() {
		n, x, err := startThroughHub(ctx, c, req)
		if err != nil || x.GetExitCode() != 0 || n != size {
			b.Fatalf("head through the hub: %d bytes, %v, %v; want %d", n, x, err, size)
		}
	}
	run() // warm up
	b.SetBytes(size)
	start := cpuTime(b)
	for b.Loop() {
		run()
	}
	reportCPU(b, start, int64(b.N)*size)
}

// ---- idle tunnels and reconnect after a hub restart ----

const (
	tunnelsEnv      = "AGENTD_BENCH_TUNNELS"        // N: run TestIdleTunnels with N daemons
	tunnelDaemonEnv = "AGENTD_BENCH_TUNNEL_DAEMONS" // set by TestIdleTunnels for its child process
)

func benchMachineKey(i int) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("agentd hub bench machine " + strconv.Itoa(i)))
	return ed25519.NewKeyFromSeed(seed[:])
}

type hubMem struct{ heap, stack, goroutines int64 }

func readHubMem() hubMem {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return hubMem{int64(ms.HeapInuse), int64(ms.StackInuse), int64(runtime.NumGoroutine())}
}

// daemonsProc is the child process holding the daemons' ends of the tunnels.
type daemonsProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   bytes.Buffer
	lines chan string
	wg    sync.WaitGroup
}

func startDaemonsProc(t *testing.T, hubURL string, ids []string, backoff string) *daemonsProc {
	t.Helper()
	p := &daemonsProc{lines: make(chan string, 16)}
	p.cmd = exec.Command(os.Args[0], "-test.run=^TestHubIdleDaemonsHelper$", "-test.count=1", "-test.v")
	p.cmd.Env = append(os.Environ(), tunnelDaemonEnv+"="+hubURL+" "+backoff+" "+strings.Join(ids, ","))
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.wg.Go(func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "DAEMONS ") {
				select {
				case p.lines <- sc.Text():
				default:
				}
			}
		}
	})
	t.Cleanup(func() { p.end(t) })
	return p
}

func (p *daemonsProc) end(t *testing.T) {
	if p.stdin == nil {
		return
	}
	p.stdin.Close()
	p.stdin = nil
	done := make(chan error, 1)
	go func() { p.wg.Wait(); done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("daemons process: %v\n%s", err, p.out.String())
		}
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-done
		t.Error("daemons process did not exit within 30 s; killed")
	}
}

// waitTunnels polls the hub's tunnel gauge until it reaches n; it returns
// when it did, or false after timeout.
func waitTunnels(h *benchHub, n int, timeout time.Duration) (time.Time, bool) {
	c := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if h.tunnels(c) >= n {
			return time.Now(), true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Now(), false
}

// TestIdleTunnels measures what N idle tunnels cost the hub (heap and
// stacks, this process only: the daemons run in a child process) and how
// long all N take to be back after a hub restart, with a quick backoff and
// with the daemon's default one (1 s initial ceiling, full jitter). Each
// daemon serves SystemService.Info and a blocking ActivityService.Watch,
// so the hub holds the same activity stream per tunnel as with agentd.
func TestIdleTunnels(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(tunnelsEnv))
	if n <= 0 {
		t.Skip("set " + tunnelsEnv + "=N to run with N idle tunnels")
	}
	if os.Getenv("AGENTD_BENCH_HEAPPROFILE") != "" {
		runtime.MemProfileRate = 1 // every allocation, for an exact breakdown
	}
	h := newBenchHub(t, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named("hub"))
	ids := make([]string, n)
	t0 := time.Now()
	for i := range n {
		m, err := h.store.CreateMachine(t.Context(), store.Machine{
			OrgID: h.org.ID, Name: fmt.Sprintf("idle-%d", i), Hostname: "bench", OS: runtime.GOOS, Arch: runtime.GOARCH,
			PublicKey: benchMachineKey(i).Public().(ed25519.PublicKey), CreatedAt: time.Now(),
		})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = m.ID
	}
	t.Logf("created %d machines in %s", n, time.Since(t0).Round(time.Millisecond))

	for _, backoff := range []string{"quick", "default"} {
		base := readHubMem()
		p := startDaemonsProc(t, h.url, ids, backoff)
		t0 := time.Now()
		tUp, ok := waitTunnels(h, n, 120*time.Second)
		if !ok {
			t.Fatalf("only %d of %d tunnels came up in 120 s", h.tunnels(http.DefaultClient), n)
		}
		t.Logf("%s backoff: %d tunnels up in %s (first connect)", backoff, n, tUp.Sub(t0).Round(time.Millisecond))
		if backoff == "quick" {
			time.Sleep(2 * time.Second) // let the hub's activity collectors settle
			after := readHubMem()
			kib := func(b int64) float64 { return float64(b) / float64(n) / 1024 }
			per := kib(after.heap - base.heap + after.stack - base.stack)
			if path := os.Getenv("AGENTD_BENCH_HEAPPROFILE"); path != "" {
				writeHeapProfile(t, path)
			}
			fmt.Printf("IDLE-TUNNELS n=%d per_tunnel_kib=%.1f heap_kib=%.1f stack_kib=%.1f goroutines=%.1f\n",
				n, per, kib(after.heap-base.heap), kib(after.stack-base.stack), float64(after.goroutines-base.goroutines)/float64(n))
			select {
			case line := <-p.lines:
				fmt.Printf("IDLE-TUNNELS-DAEMONS %s\n", strings.TrimPrefix(line, "DAEMONS "))
			case <-time.After(30 * time.Second):
				t.Log("the daemons' process did not report its memory")
			}
		}

		// Restart: stop the hub (tunnels closed going-away), serve a new one
		// on the same address and store, and time all N back.
		addr := h.addr
		tStop := time.Now()
		h.stop()
		tServe := time.Now()
		h.serve(addr)
		tBack, ok := waitTunnels(h, n, 120*time.Second)
		if !ok {
			t.Errorf("%s backoff: only %d of %d back within 120 s of the restart", backoff, h.tunnels(http.DefaultClient), n)
		}
		fmt.Printf("RESTART backoff=%s n=%d back_s=%.3f stop_s=%.3f since_new_hub_s=%.3f\n", backoff, n,
			tBack.Sub(tStop).Seconds(), tServe.Sub(tStop).Seconds(), tBack.Sub(tServe).Seconds())
		p.end(t)
		if _, ok := waitTunnels0(h, 30*time.Second); !ok {
			t.Fatalf("tunnels still registered after the daemons exited")
		}
	}
}

// writeHeapProfile writes the hub process's heap profile to path (go tool
// pprof -sample_index=inuse_space shows what the idle tunnels hold) and its
// goroutines, counted by stack, to path.goroutines.
func writeHeapProfile(t *testing.T, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		t.Fatal(err)
	}
	g, err := os.Create(path + ".goroutines")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := pprof.Lookup("goroutine").WriteTo(g, 1); err != nil {
		t.Fatal(err)
	}
}

// waitTunnels0 waits for the hub to hold no tunnel.
func waitTunnels0(h *benchHub, timeout time.Duration) (time.Time, bool) {
	c := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if h.tunnels(c) == 0 {
			return time.Now(), true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Now(), false
}

type idleActivity struct {
	agentdv1.UnimplementedActivityServiceServer
}

func (idleActivity) Watch(_ *agentdv1.WatchRequest, st grpc.ServerStreamingServer[agentdv1.WatchResponse]) error {
	<-st.Context().Done()
	return nil
}

type idleSystem struct {
	agentdv1.UnimplementedSystemServiceServer
}

func (idleSystem) Info(context.Context, *agentdv1.InfoRequest) (*agentdv1.InfoResponse, error) {
	return &agentdv1.InfoResponse{Version: "bench"}, nil
}

// TestHubIdleDaemonsHelper is not a test on its own: TestIdleTunnels runs
// the test binary with it to hold the daemons in another process.
func TestHubIdleDaemonsHelper(t *testing.T) {
	spec := os.Getenv(tunnelDaemonEnv)
	if spec == "" {
		t.Skip("the daemons' process of TestIdleTunnels")
	}
	f := strings.SplitN(spec, " ", 3)
	if len(f) != 3 {
		t.Fatalf("%s=%q", tunnelDaemonEnv, spec)
	}
	hubURL, backoff, ids := f[0], f[1], strings.Split(f[2], ",")
	b := transport.Backoff{} // the daemon's defaults
	if backoff == "quick" {
		b = transport.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	}
	base := readHubMem()
	srv := grpc.NewServer(grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}))
	agentdv1.RegisterActivityServiceServer(srv, idleActivity{})
	agentdv1.RegisterSystemServiceServer(srv, idleSystem{})
	var serving sync.WaitGroup
	tuns := make([]*transport.Tunnel, len(ids))
	for i, id := range ids {
		tun, err := transport.Listen(transport.Options{HubURL: hubURL, MachineID: id, Key: benchMachineKey(i), Backoff: b})
		if err != nil {
			t.Fatal(err)
		}
		tuns[i] = tun
		serving.Go(func() { srv.Serve(tun) })
	}
	for _, tun := range tuns {
		deadline := time.After(120 * time.Second)
		for tun.Status().State != transport.StateConnected {
			select {
			case <-tun.Updated():
			case <-deadline:
				t.Fatalf("tunnel %s: %+v", tun.Status().MachineID, tun.Status())
			}
		}
	}
	after := readHubMem()
	kib := func(b int64) float64 { return float64(b) / float64(len(ids)) / 1024 }
	fmt.Printf("DAEMONS per_tunnel_kib=%.1f heap_kib=%.1f stack_kib=%.1f goroutines=%.1f\n",
		kib(after.heap-base.heap+after.stack-base.stack), kib(after.heap-base.heap), kib(after.stack-base.stack),
		float64(after.goroutines-base.goroutines)/float64(len(ids)))
	io.Copy(io.Discard, os.Stdin) // until the parent is done
	for _, tun := range tuns {
		tun.Close()
	}
	srv.Stop()
	serving.Wait()
}
