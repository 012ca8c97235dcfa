package hub_test

// The sandboxes' benchmarks (make bench-sandbox): a conversation's first
// exec in a cold sandbox next to `docker run -d` + `docker exec` of the
// same image, the first exec from the warm pool, and exec in a running
// sandbox next to exec on a paired agentd through the same kind of hub
// (in this process, and as a process of its own: `agentd run`, what a
// paired machine is, the baseline of the target). BenchmarkExecSideBySide
// makes those exec calls in turn, one to each per round, so that a loaded
// machine slows all alike; the single-target exec benchmarks remain for
// profiling one path.
//
//	go test -run '^$' -bench 'Sandbox|DockerRunExec|MachineExec|MachineProcessExec|ExecSideBySide' -benchtime 20x ./internal/hub/
//
// scripts/bench-sandbox.sh runs them and prints the ratios. They need a Docker engine (they skip without one): the one
// DOCKER_HOST names, else the local socket; the driver and the docker CLI calls here both follow DOCKER_HOST, so
// DOCKER_HOST=unix:///…/docker.sock runs them on another engine (the script's OVERLAY2=1 does so on a private overlay2
// engine). They remove every container and volume they made.
//
// startSandboxHub takes a *testing.T, so the hub is built here the same
// way for a testing.TB, as a benchHub (bench_test.go) so that startDaemon
// pairs a machine with it.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/metadata"

	"github.com/devdepot-ai/agentd/internal/hub"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/docker"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// sbExecCallsEnv sets how many calls one iteration of the exec benchmarks
// makes (default 1), so that one -benchtime Nx gives the cold benchmarks N
// sandboxes and the exec ones N×calls samples in the same run.
const sbExecCallsEnv = "AGENTD_BENCH_EXEC_CALLS"

var sbTrue = &agentdv1.StartRequest{Argv: []string{"true"}}

// sbBench is a hub running sandboxes on the local engine, with the
// engine's calls timed and the hub's log kept.
type sbBench struct {
	*benchHub
	drv  *sbTimedDriver
	logs *observer.ObservedLogs
	proc agentdv1.ProcessServiceClient
	envs hubv1.EnvironmentServiceClient
}

// newSandboxBench starts the hub as startSandboxHub does (network none,
// the same limits), tuned by tune.
func newSandboxBench(b *testing.B, tune func(*sandboxes.Options)) *sbBench {
	b.Helper()
	return newSandboxBenchOn(b, docker.Options{}, tune)
}

// newSandboxBenchOn is newSandboxBench with a driver of dopts.
func newSandboxBenchOn(b *testing.B, dopts docker.Options, tune func(*sandboxes.Options)) *sbBench {
	b.Helper()
	sandboxtest.BaseImage(b) // skips without an engine
	drv, err := docker.New(dopts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { drv.Close() })
	hubID := "bench-" + sbRandom()
	td := &sbTimedDriver{Driver: drv, took: map[string][]time.Duration{}}
	// Registered before the hub's own cleanup, so it runs after the hub
	// has stopped and nothing is being made any more. By name too: a
	// create cut short by the hub's stop can leave a workspace volume the
	// engine made without labels (mounting a name it no longer had).
	b.Cleanup(func() {
		sbRemoveLabelled(sandbox.LabelHub + "=" + hubID)
		sbRemoveVolumes(td.names())
		// Bounded workspaces whose volumes went: their loop devices.
		if err := drv.RecoverWorkspaces(context.Background()); err != nil {
			b.Errorf("release bounded workspaces: %v", err)
		}
	})
	o := sandboxes.Options{
		Driver:         td,
		AgentdDir:      sbAgentdDir(b),
		SocketDir:      b.TempDir(),
		BuiltinNetwork: "none",
		StartTimeout:   60 * time.Second,
		HubID:          hubID,
		Limits:         sandbox.Limits{CPUs: 1, MemoryBytes: 512 << 20, Pids: 256, TmpBytes: 64 << 20, HomeBytes: 64 << 20},
	}
	if tune != nil {
		tune(&o)
	}
	core, logs := observer.New(zap.InfoLevel)
	hb := hubtest.Start(b, hubtest.Options{Org: "bench", Actor: "bench", Logger: zap.New(core).Named("hub"), Sandboxes: o})
	h := &benchHub{tb: b, hub: hb, store: hb.Store, org: hb.Org, token: hb.Token}
	h.sync()
	cc := h.conn()
	return &sbBench{benchHub: h, drv: td, logs: logs,
		proc: agentdv1.NewProcessServiceClient(cc), envs: hubv1.NewEnvironmentServiceClient(cc)}
}

// convCtx routes calls to the conversation's sandbox of the environment,
// as an agent's calls are routed.
func (h *sbBench) convCtx(env, conv string) context.Context {
	md := metadata.Pairs("authorization", "Bearer "+h.token, "agentd-environment", env, "agentd-conversation", conv)
	return metadata.NewOutgoingContext(h.tb.Context(), md)
}

// exec runs true through the hub and fails the benchmark unless it exits 0.
func (h *sbBench) exec(ctx context.Context) {
	if _, x, err := startThroughHub(ctx, h.proc, sbTrue); err != nil || x.GetExitCode() != 0 {
		h.tb.Fatalf("true through the hub: %v %v", x, err)
	}
}

func (h *sbBench) list() []*hubv1.Sandbox {
	resp, err := h.envs.ListSandboxes(authCtx(h.tb.Context(), h.token, ""), &hubv1.ListSandboxesRequest{})
	if err != nil {
		h.tb.Fatalf("list sandboxes: %v", err)
	}
	return resp.GetSandboxes()
}

// removeConversations removes the sandboxes that serve a conversation
// (the warm pool stays), and waits for the engine to be done with them.
func (h *sbBench) removeConversations() {
	for _, sb := range h.list() {
		if sb.GetConversation() == "" {
			continue
		}
		if _, err := h.envs.RemoveSandbox(authCtx(h.tb.Context(), h.token, ""), &hubv1.RemoveSandboxRequest{Id: sb.GetId()}); err != nil {
			h.tb.Fatalf("remove sandbox %s: %v", sb.GetId(), err)
		}
	}
}

// waitWarm waits until the warm pool holds n sandboxes, all online.
func (h *sbBench) waitWarm(n int) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		online, pending := 0, 0
		for _, sb := range h.list() {
			switch {
			case sb.GetConversation() != "":
			case sb.GetOnline():
				online++
			default:
				pending++
			}
		}
		if online >= n && pending == 0 {
			return
		}
		if time.Now().After(deadline) {
			h.tb.Fatalf("warm pool: %d online, %d starting after 2 min; want %d online", online, pending, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// reportPhases reports the p50 of the engine's calls and of the hub's
// own "sandbox started … took" (from the request to agentd connected),
// so that the first exec's time can be split.
func (h *sbBench) reportPhases(b *testing.B) {
	for _, op := range []string{"create", "start", "image"} {
		if ds := h.drv.taken(op); len(ds) > 0 {
			b.ReportMetric(sbQuantile(ds, 0.5), op+"-p50-ms")
		}
	}
	var online []time.Duration
	for _, e := range h.logs.FilterMessage("sandbox started").All() {
		if d, ok := e.ContextMap()["took"].(time.Duration); ok {
			online = append(online, d)
		}
	}
	if len(online) > 0 {
		b.ReportMetric(sbQuantile(online, 0.5), "online-p50-ms")
	}
}

// resetPhases forgets what the warm-up took.
func (h *sbBench) resetPhases() {
	h.drv.reset()
	h.logs.TakeAll()
}

// BenchmarkSandboxColdFirstExec is a new conversation's first exec of true
// in the built-in environment without a warm pool: the hub creates the
// sandbox (volume, container, agentd connecting back) and then runs true
// in it. Its sandbox is removed after each iteration, untimed.
func BenchmarkSandboxColdFirstExec(b *testing.B) {
	h := newSandboxBench(b, nil) // WarmBuiltin 0
	h.exec(h.convCtx(hub.BuiltinEnvironment, "cold-warmup"))
	h.removeConversations()
	h.resetPhases()
	var ds []time.Duration
	for i := 0; b.Loop(); i++ {
		ctx := h.convCtx(hub.BuiltinEnvironment, "cold-"+strconv.Itoa(i))
		t0 := time.Now()
		h.exec(ctx)
		ds = append(ds, time.Since(t0))
		b.StopTimer()
		h.removeConversations()
		b.StartTimer()
	}
	sbReportQuantiles(b, ds, 0.5, 0.9)
	h.reportPhases(b)
}

// BenchmarkSandboxPausedFirstExec is the first exec of true in a
// conversation's sandbox that was paused (docker pause) just before: the
// call resumes it (unpause) and runs. Untimed before each iteration: the
// sandbox is paused through ChangeSandboxState. The pause is short, so its
// tunnel is still up (the hub's keepalive drops a frozen one after about
// 30 s; a resume after that waits for agentd's reconnect).
func BenchmarkSandboxPausedFirstExec(b *testing.B) {
	sbResumeBench(b, sandboxes.ActionPause)
}

// BenchmarkSandboxStoppedFirstExec is the first exec of true in a
// conversation's sandbox that was stopped (docker stop, /workspace kept):
// the call starts its container again, waits for its agentd to dial in,
// and runs. Its baseline is BenchmarkSandboxColdFirstExec, in the same run.
func BenchmarkSandboxStoppedFirstExec(b *testing.B) {
	sbResumeBench(b, sandboxes.ActionStop)
}

func sbResumeBench(b *testing.B, action string) {
	h := newSandboxBench(b, nil)
	ctx := h.convCtx(hub.BuiltinEnvironment, "resume-"+action)
	h.exec(ctx)
	id := h.list()[0].GetId()
	admin := authCtx(b.Context(), h.token, "")
	var ds []time.Duration
	for b.Loop() {
		b.StopTimer()
		if _, err := h.envs.ChangeSandboxState(admin, &hubv1.ChangeSandboxStateRequest{Id: id, Action: action}); err != nil {
			b.Fatalf("%s %s: %v", action, id, err)
		}
		b.StartTimer()
		t0 := time.Now()
		h.exec(ctx)
		ds = append(ds, time.Since(t0))
	}
	sbReportQuantiles(b, ds, 0.5, 0.9)
	if action == sandboxes.ActionPause {
		b.ReportMetric(sbQuantile(h.drv.taken("unpause"), 0.5), "unpause-p50-ms")
	}
}

// BenchmarkDockerRunExec is the baseline of BenchmarkSandboxColdFirstExec:
// `docker run -d --network none <base image> sleep 300` and then `docker
// exec <id> true`, with the docker CLI; the container is removed after
// each iteration, untimed.
func BenchmarkDockerRunExec(b *testing.B) {
	img := sandboxtest.BaseImage(b)
	label := "ai.devdepot.agentd.bench=" + sbRandom()
	b.Cleanup(func() { sbRemoveLabelled(label) })
	cli := func(args ...string) string {
		out, err := exec.CommandContext(b.Context(), "docker", args...).CombinedOutput()
		if err != nil {
			b.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	var ds, runs, execs []time.Duration
	once := func() {
		t0 := time.Now()
		id := cli("run", "-d", "--network", "none", "--label", label, img, "sleep", "300")
		t1 := time.Now()
		cli("exec", id, "true")
		t2 := time.Now()
		ds, runs, execs = append(ds, t2.Sub(t0)), append(runs, t1.Sub(t0)), append(execs, t2.Sub(t1))
		b.StopTimer()
		cli("rm", "-f", id)
		b.StartTimer()
	}
	once() // warm up
	ds, runs, execs = nil, nil, nil
	for b.Loop() {
		once()
	}
	sbReportQuantiles(b, ds, 0.5, 0.9)
	b.ReportMetric(sbQuantile(runs, 0.5), "run-p50-ms")
	b.ReportMetric(sbQuantile(execs, 0.5), "exec-p50-ms")
}

// BenchmarkSandboxWarmFirstExec is a new conversation's first exec of true
// when the warm pool is full: the hub hands it a running sandbox (and
// refills the pool in the background, as it does in service). Before each
// iteration, untimed: the last conversation's sandbox is removed and the
// pool is waited for.
func BenchmarkSandboxWarmFirstExec(b *testing.B) {
	const pool = 1
	h := newSandboxBench(b, func(o *sandboxes.Options) { o.WarmBuiltin = pool })
	// The org's first use of the environment starts filling its pool; a
	// second warms the path from the pool.
	h.exec(h.convCtx(hub.BuiltinEnvironment, "warm-warmup-0"))
	h.waitWarm(pool)
	h.exec(h.convCtx(hub.BuiltinEnvironment, "warm-warmup-1"))
	h.resetPhases()
	var ds []time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		h.removeConversations()
		h.waitWarm(pool)
		ctx := h.convCtx(hub.BuiltinEnvironment, "warm-"+strconv.Itoa(i))
		b.StartTimer()
		t0 := time.Now()
		h.exec(ctx)
		ds = append(ds, time.Since(t0))
	}
	h.waitWarm(pool) // the last refill done before the hub stops
	sbReportQuantiles(b, ds, 0.5, 0.9)
}

// BenchmarkSandboxExec is exec of true in a conversation's running
// sandbox, routed by environment and conversation as an agent's calls are.
func BenchmarkSandboxExec(b *testing.B) {
	h := newSandboxBench(b, nil)
	sbExecLoop(b, h, h.convCtx(hub.BuiltinEnvironment, "exec"))
}

// BenchmarkSandboxExecByID is BenchmarkSandboxExec routed by the
// sandbox's id (agentd-machine: sb-…), as a paired machine's calls are:
// what routing by environment and conversation adds is the difference.
func BenchmarkSandboxExecByID(b *testing.B) {
	h := newSandboxBench(b, nil)
	h.exec(h.convCtx(hub.BuiltinEnvironment, "exec"))
	sbs := h.list()
	if len(sbs) != 1 {
		b.Fatalf("%d sandboxes, want 1", len(sbs))
	}
	sbExecLoop(b, h, authCtx(b.Context(), h.token, sbs[0].GetId()))
}

// BenchmarkMachineExec is the baseline of BenchmarkSandboxExec: exec of
// true on a paired agentd (in this process, as in BenchmarkHubExecTrue)
// through a hub set up as for the sandboxes.
func BenchmarkMachineExec(b *testing.B) {
	h := newSandboxBench(b, nil)
	id := h.startDaemon()
	sbExecLoop(b, h, authCtx(b.Context(), h.token, id))
}

// BenchmarkMachineProcessExec is BenchmarkMachineExec with the paired
// agentd in a process of its own (the static agentd the sandboxes run, as
// `agentd run`), as a sandbox's agentd is and a user's machine's would be.
func BenchmarkMachineProcessExec(b *testing.B) {
	h := newSandboxBench(b, nil)
	sbExecLoop(b, h, h.startProcessAgentd())
}

// BenchmarkExecSideBySide is exec of true through one hub to, in turn, a
// conversation's running sandbox, the same sandbox by its id, the static
// agentd paired as a process of its own (`agentd run`: what a paired
// machine is, the baseline of the target) and a paired agentd in this
// process (the optimistic bound), one call to each per round, so that
// the machine's load falls on all alike. It reports each one's p50 and
// p90 and the ratios of the sandbox's p50 to the two baselines'.
func BenchmarkExecSideBySide(b *testing.B) {
	h := newSandboxBench(b, nil)
	conv := h.convCtx(hub.BuiltinEnvironment, "exec")
	h.exec(conv) // creates the sandbox
	sbs := h.list()
	if len(sbs) != 1 {
		b.Fatalf("%d sandboxes, want 1", len(sbs))
	}
	targets := []*sbTarget{
		{name: "sandbox", ctx: conv},
		{name: "sandbox-by-id", ctx: authCtx(b.Context(), h.token, sbs[0].GetId())},
		{name: "process", ctx: h.startProcessAgentd()},
		{name: "inproc", ctx: authCtx(b.Context(), h.token, h.startDaemon())},
	}
	calls := sbExecCalls(b)
	for range 5 {
		for _, t := range targets {
			h.exec(t.ctx)
		}
	}
	rounds := 0
	for b.Loop() {
		for range calls {
			for _, t := range targets {
				t0 := time.Now()
				h.exec(t.ctx)
				t.ds = append(t.ds, time.Since(t0))
			}
			rounds++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(rounds), "ns/op") // per round
	p50 := map[string]float64{}
	for _, t := range targets {
		p50[t.name] = sbQuantile(t.ds, 0.5)
		b.ReportMetric(p50[t.name], t.name+"-p50-ms")
		b.ReportMetric(sbQuantile(t.ds, 0.9), t.name+"-p90-ms")
	}
	b.ReportMetric(p50["sandbox"]/p50["process"], "sandbox/process")
	b.ReportMetric(p50["sandbox"]/p50["inproc"], "sandbox/inproc")
	b.ReportMetric(p50["process"]/p50["inproc"], "process/inproc")
}

// sbTarget is one destination of BenchmarkExecSideBySide's calls.
type sbTarget struct {
	name string
	ctx  context.Context
	ds   []time.Duration
}

// startProcessAgentd pairs the static agentd the sandboxes run with the
// hub and starts it as `agentd run` (a process of its own, stopped at the
// end of the benchmark), and returns a context that routes calls to it.
func (h *sbBench) startProcessAgentd() context.Context {
	b := h.tb
	code, err := hubv1.NewAdminServiceClient(h.conn()).CreatePairingCode(authCtx(b.Context(), h.token, ""), &hubv1.CreatePairingCodeRequest{})
	if err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(sbAgentdDir(b), "agentd")
	dir := b.TempDir()
	env := append(os.Environ(), "AGENTD_CONFIG_DIR="+filepath.Join(dir, "config"), "AGENTD_STATE_DIR="+filepath.Join(dir, "state"))
	pair := exec.CommandContext(b.Context(), bin, "pair", "--hub", h.url, "--code", code.GetCode(), "--name", "bench-process")
	pair.Env = env
	out, err := pair.Output()
	if err != nil {
		b.Fatalf("agentd pair: %v", err)
	}
	id := strings.TrimSpace(string(out))
	var logs strings.Builder
	run := exec.Command(bin, "run", "--workspace", dir, "--socket", "-", "--log-level", "warn")
	run.Env, run.Stderr = env, &logs
	if err := run.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = run.Process.Signal(os.Interrupt)
		_ = run.Wait()
	})
	ctx := authCtx(b.Context(), h.token, id)
	sys := agentdv1.NewSystemServiceClient(h.conn())
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := sys.Info(ctx, &agentdv1.InfoRequest{}); err == nil {
			return ctx
		} else if time.Now().After(deadline) {
			b.Fatalf("agentd run: machine %s not reachable through the hub: %v\n%s", id, err, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sbAgentdDirEnv names a directory holding another static agentd for the
// sandboxes and the process baseline than the one built from this
// checkout (to compare two builds in one session).
const sbAgentdDirEnv = "AGENTD_BENCH_AGENTD_DIR"

// sbAgentdDir is the directory of the static agentd the benchmarks run.
func sbAgentdDir(b testing.TB) string {
	if dir := os.Getenv(sbAgentdDirEnv); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "agentd")); err != nil {
			b.Fatalf("%s=%s: %v", sbAgentdDirEnv, dir, err)
		}
		return dir
	}
	return sandboxtest.AgentdBinary(b)
}

// sbExecCalls is how many calls one iteration of the exec benchmarks
// makes (sbExecCallsEnv, default 1).
func sbExecCalls(b *testing.B) int {
	v := os.Getenv(sbExecCallsEnv)
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", sbExecCallsEnv, v)
	}
	return n
}

// sbExecLoop times exec of true through the hub to ctx's target, after a
// warm-up (which, for a sandbox, creates it). ns/op is per call.
func sbExecLoop(b *testing.B, h *sbBench, ctx context.Context) {
	calls := sbExecCalls(b)
	for range 5 {
		h.exec(ctx)
	}
	h.resetPhases()
	var ds []time.Duration
	for b.Loop() {
		for range calls {
			t0 := time.Now()
			h.exec(ctx)
			ds = append(ds, time.Since(t0))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(len(ds)), "ns/op")
	sbReportQuantiles(b, ds, 0.5, 0.9, 0.99)
	// The engine calls on the path of each call (routing by environment
	// looks the environment's image up).
	if n := len(h.drv.taken("image")); n > 0 {
		b.ReportMetric(float64(n)/float64(len(ds)), "engine-calls/op")
	}
	h.reportPhases(b)
}

// sbTimedDriver is a sandbox.Driver that records how long the engine's
// calls take.
type sbTimedDriver struct {
	sandbox.Driver
	mu      sync.Mutex
	took    map[string][]time.Duration
	created []string        // the names of the containers asked for
	exports map[string]bool // containers whose workspace goes the engine's way
}

// MountWorkspace offers the driver's, unless noMount named the container.
func (d *sbTimedDriver) MountWorkspace(ctx context.Context, id string) (string, func() error, error) {
	d.mu.Lock()
	off := d.exports[id]
	d.mu.Unlock()
	m, ok := d.Driver.(sandboxes.WorkspaceMounter)
	if off || !ok {
		return "", nil, errors.New("the benchmark reads this workspace through the engine's export")
	}
	defer d.record("mount-workspace", time.Now())
	return m.MountWorkspace(ctx, id)
}

// noMount makes container id's archive go through ExportWorkspace.
func (d *sbTimedDriver) noMount(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.exports == nil {
		d.exports = map[string]bool{}
	}
	d.exports[id] = true
}

var _ sandbox.Driver = (*sbTimedDriver)(nil)

func (d *sbTimedDriver) record(op string, t0 time.Time) {
	d.mu.Lock()
	d.took[op] = append(d.took[op], time.Since(t0))
	d.mu.Unlock()
}

func (d *sbTimedDriver) taken(op string) []time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.took[op])
}

func (d *sbTimedDriver) reset() {
	d.mu.Lock()
	clear(d.took)
	d.mu.Unlock()
}

func (d *sbTimedDriver) Image(ctx context.Context, ref string) (sandbox.Image, error) {
	defer d.record("image", time.Now())
	return d.Driver.Image(ctx, ref)
}

func (d *sbTimedDriver) names() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.created)
}

func (d *sbTimedDriver) Create(ctx context.Context, s sandbox.Spec) (string, error) {
	d.mu.Lock()
	d.created = append(d.created, s.Name)
	d.mu.Unlock()
	defer d.record("create", time.Now())
	return d.Driver.Create(ctx, s)
}

func (d *sbTimedDriver) Unpause(ctx context.Context, id string) error {
	defer d.record("unpause", time.Now())
	return d.Driver.Unpause(ctx, id)
}

func (d *sbTimedDriver) Start(ctx context.Context, id string) error {
	defer d.record("start", time.Now())
	return d.Driver.Start(ctx, id)
}

// sbQuantile is the q-quantile of ds in milliseconds (nearest rank below).
func sbQuantile(ds []time.Duration, q float64) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[int(q*float64(len(s)-1))]) / float64(time.Millisecond)
}

// sbReportQuantiles reports p50-ms, p90-ms … for the quantiles qs.
func sbReportQuantiles(b *testing.B, ds []time.Duration, qs ...float64) {
	if len(ds) == 0 {
		return
	}
	for _, q := range qs {
		b.ReportMetric(sbQuantile(ds, q), fmt.Sprintf("p%.0f-ms", q*100))
	}
}

// sbRemoveLabelled force-removes the containers, then the volumes, that
// carry label (k=v).
func sbRemoveLabelled(label string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, kind := range []string{"container", "volume"} {
		ls := []string{kind, "ls", "-q", "--filter", "label=" + label}
		if kind == "container" {
			ls = []string{"ps", "-aq", "--filter", "label=" + label}
		}
		out, err := exec.CommandContext(ctx, "docker", ls...).Output()
		if ids := strings.Fields(string(out)); err == nil && len(ids) > 0 {
			rm := append([]string{kind, "rm", "-f"}, ids...)
			_ = exec.CommandContext(ctx, "docker", rm...).Run()
		}
	}
}

// sbRemoveVolumes removes the workspace volumes of the containers named,
// where they are left.
func sbRemoveVolumes(names []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "volume", "ls", "-q").Output()
	if err != nil {
		return
	}
	left := strings.Fields(string(out))
	rm := []string{"volume", "rm", "-f"}
	for _, n := range names {
		if slices.Contains(left, n+"-workspace") {
			rm = append(rm, n+"-workspace")
		}
	}
	if len(rm) > 3 {
		_ = exec.CommandContext(ctx, "docker", rm...).Run()
	}
}

func sbRandom() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
