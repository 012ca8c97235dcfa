package replica_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"

	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/hub/store/pgtest"
	"github.com/devdepot-ai/agentd/internal/testbin"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
	"github.com/devdepot-ai/agentd/transport"
)

// The replica-kill benchmark (make bench-hub runs it):
//
//	AGENTD_BENCH_REPLICA_MACHINES=1000 go test -run '^TestReplicaKill$' -v ./internal/hub/replica/
const (
	killMachinesEnv = "AGENTD_BENCH_REPLICA_MACHINES" // N: run TestReplicaKill with N machines
	agenthubEnv     = "AGENTD_BENCH_AGENTHUB"         // the agenthub binary (default: built into a temporary directory)
	settleEnv       = "AGENTD_BENCH_REPLICA_SETTLE"   // how long every tunnel is up before the kill (default 61s)
)

// defaultSettle: a tunnel that stayed up a minute (transport.Backoff's
// default ResetAfter) reconnects from the initial backoff (ceiling 1 s), as
// a daemon connected for long does; one up for less goes on from where its
// last reconnects left its backoff.
const defaultSettle = 61 * time.Second

// hubProc is one `agenthub serve` replica process.
type hubProc struct {
	cmd      *exec.Cmd
	addr     string // public listener
	internal string // --internal-addr
	log      string // its stderr
	done     chan struct{}
}

// freeAddr returns a loopback address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// agenthubBinary returns $AGENTD_BENCH_AGENTHUB, or builds agenthub.
func agenthubBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv(agenthubEnv); b != "" {
		return b
	}
	dir := t.TempDir()
	t.Logf("building agenthub (set %s to use a built one)", agenthubEnv)
	if err := testbin.Build(dir, "agenthub"); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "agenthub")
}

// startHubProc runs `agenthub serve` on db as a replica and waits for its
// /healthz. The test's end kills it if it still runs.
func startHubProc(t *testing.T, bin, db, dir string) *hubProc {
	t.Helper()
	p := &hubProc{addr: freeAddr(t), internal: freeAddr(t), log: filepath.Join(dir, "stderr"), done: make(chan struct{})}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	p.cmd = exec.Command(bin, "serve", "--listen", p.addr, "--internal-addr", p.internal, "--db", db,
		"--sandboxes", "off", "--agent-releases", "off", "--log-level", "warn",
		"--max-conns-per-client", "0") // every daemon of the test dials from 127.0.0.1
	p.cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir)
	p.cmd.Stderr = logf
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := c.Get("http://" + p.addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case <-p.done:
			b, _ := os.ReadFile(p.log)
			t.Fatalf("agenthub serve exited at startup:\n%s", b)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("agenthub serve on %s not healthy within 30 s", p.addr)
		}
	}
}

func killMachineKey(i int) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("agentd replica kill bench machine " + strconv.Itoa(i)))
	return ed25519.NewKeyFromSeed(seed[:])
}

type benchSystem struct {
	agentdv1.UnimplementedSystemServiceServer
}

func (benchSystem) Info(context.Context, *agentdv1.InfoRequest) (*agentdv1.InfoResponse, error) {
	return &agentdv1.InfoResponse{Version: "bench"}, nil
}

type benchActivity struct {
	agentdv1.UnimplementedActivityServiceServer
}

func (benchActivity) Watch(_ *agentdv1.WatchRequest, st grpc.ServerStreamingServer[agentdv1.WatchResponse]) error {
	<-st.Context().Done()
	return nil
}

// serveDaemons opens a tunnel per machine through hubURL with the daemon's
// default backoff (1 s initial ceiling, full jitter, ×1.6, cap 30 s) and
// serves System.Info and a blocking Activity.Watch on each, as agentd does.
func serveDaemons(t *testing.T, hubURL string, ids []string) []*transport.Tunnel {
	t.Helper()
	srv := grpc.NewServer(grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}))
	agentdv1.RegisterSystemServiceServer(srv, benchSystem{})
	agentdv1.RegisterActivityServiceServer(srv, benchActivity{})
	var serving sync.WaitGroup
	tuns := make([]*transport.Tunnel, len(ids))
	for i, id := range ids {
		tun, err := transport.Listen(transport.Options{HubURL: hubURL, MachineID: id, Key: killMachineKey(i)})
		if err != nil {
			t.Fatal(err)
		}
		tuns[i] = tun
		serving.Go(func() { srv.Serve(tun) })
	}
	t.Cleanup(func() {
		for _, tun := range tuns {
			tun.Close()
		}
		srv.Stop()
		serving.Wait()
	})
	return tuns
}

// backAfter waits until tun is connected by a tunnel that came up after
// t0; it returns when that tunnel came up, or false at ctx's end.
func backAfter(ctx context.Context, tun *transport.Tunnel, t0 time.Time) (time.Time, bool) {
	for {
		ch := tun.Updated()
		if s := tun.Status(); s.State == transport.StateConnected && s.ConnectedSince.After(t0) {
			return s.ConnectedSince, true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return time.Time{}, false
		}
	}
}

// routable calls System.Info for the machine through every client until
// all succeed, each retried every 50 ms (hundreds of machines polled at
// once load the survivors too); it returns when, or false at ctx's end.
func routable(ctx context.Context, clients []agentdv1.SystemServiceClient, token, id string) (time.Time, bool) {
	mctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token, "agentd-machine", id)
	for _, c := range clients {
		for {
			cctx, cancel := context.WithTimeout(mctx, 2*time.Second)
			_, err := c.Info(cctx, &agentdv1.InfoRequest{})
			cancel()
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return time.Time{}, false
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return time.Now(), true
}

// benchMachines makes an org, an admin token and n machines (keys from
// killMachineKey) in st.
func benchMachines(t *testing.T, st store.Store, n int) (org store.Org, token string, ids []string) {
	t.Helper()
	ctx := t.Context()
	org, err := st.CreateOrg(ctx, "bench", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	token, hash := store.NewToken()
	if _, err := st.CreateToken(ctx, store.Token{OrgID: org.ID, Name: "bench", Role: store.RoleAdmin, Hash: hash, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	ids = make([]string, n)
	for i := range n {
		m, err := st.CreateMachine(ctx, store.Machine{
			OrgID: org.ID, Name: fmt.Sprintf("m-%d", i), Hostname: "bench", OS: runtime.GOOS, Arch: runtime.GOARCH,
			PublicKey: killMachineKey(i).Public().(ed25519.PublicKey), CreatedAt: time.Now(),
		})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = m.ID
	}
	return org, token, ids
}

// TestReplicaKill: N machines' tunnels spread round robin over three
// `agenthub serve` replica processes on one PostgreSQL database, through a
// load balancer; one replica is killed (SIGKILL: no goodbye, its tunnels
// cut by the kernel, its registry row left to expire). It measures, for
// each machine the dead replica held, when its daemon's tunnel was back on
// a survivor (real backoff) and when System.Info through each surviving
// replica (one of them one hop away) reached it again.
func TestReplicaKill(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(killMachinesEnv))
	if n <= 0 {
		t.Skip("set " + killMachinesEnv + "=N to run with N machines over three replicas")
	}
	bin := agenthubBinary(t)
	url := pgtest.Database(t)
	st := openPostgres(t, url)
	ctx := t.Context()
	org, token, ids := benchMachines(t, st, n)

	dir := t.TempDir()
	hubs := make([]*hubProc, 3)
	addrs := make([]string, 3)
	for i := range hubs {
		hubs[i] = startHubProc(t, bin, url, filepath.Join(dir, fmt.Sprintf("hub%d", i)))
		addrs[i] = hubs[i].addr
	}
	lb := newRRBalancer(t, addrs...)
	t0 := time.Now()
	tuns := serveDaemons(t, lb.URL(), ids)
	waitRoutes(t, st, org.ID, n, 120*time.Second)
	t.Logf("%d tunnels up and routed in %s", n, time.Since(t0).Round(time.Millisecond))
	settle(t, tuns)
	holders := waitRoutes(t, st, org.ID, n, 10*time.Second)

	// The victim: the replica process listening on hubs[1].internal.
	victim, survivors := hubs[1], []*hubProc{hubs[0], hubs[2]}
	reps, err := st.ListReplicas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	victimID := replicaAt(reps, victim)
	var held []int
	per := map[string]int{}
	for i, id := range ids {
		per[holders[id]]++
		if holders[id] == victimID {
			held = append(held, i)
		}
	}
	if victimID == "" || len(held) == 0 {
		t.Fatalf("no machines on the victim (replicas %v, per replica %v)", reps, per)
	}
	clients := make([]agentdv1.SystemServiceClient, len(survivors))
	for i, s := range survivors {
		cc, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		clients[i] = agentdv1.NewSystemServiceClient(cc)
	}

	tKill := time.Now()
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	rerouted := watchRoutes(wctx, t, st, org.ID, ids, held, victimID, tKill)
	back, reach := measureBack(wctx, t, tuns, held, clients, token, ids, tKill)
	routes := <-rerouted
	for _, p := range hubs {
		if b, _ := os.ReadFile(p.log); len(b) > 0 {
			t.Logf("agenthub serve on %s logged:\n%s", p.addr, tail(b, 4096))
		}
	}
	fmt.Printf("REPLICA-KILL n=%d replicas=3 on_victim=%d per_replica=%d/%d/%d back_p50_s=%.3f back_p100_s=%.3f route_p50_s=%.3f route_p100_s=%.3f routable_p50_s=%.3f routable_p100_s=%.3f\n",
		n, len(held), per[replicaAt(reps, hubs[0])], per[victimID], per[replicaAt(reps, hubs[2])],
		back[len(back)/2].Seconds(), back[len(back)-1].Seconds(), routes[len(routes)/2].Seconds(), routes[len(routes)-1].Seconds(),
		reach[len(reach)/2].Seconds(), reach[len(reach)-1].Seconds())
}

// measureBack waits, for each machine in held (indexes into ids and
// tuns), until its tunnel is back after tKill and System.Info reaches it
// through every client; it returns both delays, sorted.
func measureBack(ctx context.Context, t *testing.T, tuns []*transport.Tunnel, held []int, clients []agentdv1.SystemServiceClient,
	token string, ids []string, tKill time.Time) (back, reach []time.Duration) {
	t.Helper()
	back = make([]time.Duration, len(held))
	reach = make([]time.Duration, len(held))
	failed := make([]bool, len(held))
	var wg sync.WaitGroup
	for k, i := range held {
		wg.Go(func() {
			tb, ok := backAfter(ctx, tuns[i], tKill)
			if !ok {
				failed[k] = true
				return
			}
			tr, ok := routable(ctx, clients, token, ids[i])
			back[k], reach[k], failed[k] = tb.Sub(tKill), tr.Sub(tKill), !ok
		})
	}
	wg.Wait()
	if c := countTrue(failed); c > 0 {
		t.Fatalf("%d of the %d machines on the killed replica not back and routable within 120 s", c, len(held))
	}
	slices.Sort(back)
	slices.Sort(reach)
	return back, reach
}

// settle waits until every tunnel has been up for $AGENTD_BENCH_REPLICA_SETTLE
// (default defaultSettle) without a break; a tunnel that drops meanwhile
// (a handshake timed out under load …) starts the wait again, three times
// at most.
func settle(t *testing.T, tuns []*transport.Tunnel) {
	t.Helper()
	d := defaultSettle
	if v := os.Getenv(settleEnv); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("%s=%q: %v", settleEnv, v, err)
		}
	}
	for range 3 {
		var last time.Time
		for _, tun := range tuns {
			up, ok := backAfter(t.Context(), tun, time.Time{})
			if !ok {
				t.Fatal(t.Context().Err())
			}
			if up.After(last) {
				last = up
			}
		}
		t.Logf("waiting until every tunnel has been up %s (the daemons' backoff resets after a minute up)", d)
		select {
		case <-time.After(time.Until(last.Add(d))):
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
		steady := true
		for _, tun := range tuns {
			if s := tun.Status(); s.State != transport.StateConnected || s.ConnectedSince.After(last) {
				t.Logf("tunnel %s went down while settling: %s, %v", s.MachineID, s.State, s.Err)
				steady = false
			}
		}
		if steady {
			return
		}
	}
	t.Fatal("tunnels still dropping after three waits")
}

// watchRoutes reads the org's routes every 50 ms until each machine in
// held (indexes into ids) has a route to a replica other than victim; it
// sends how long after t0 each one's was first seen, sorted (fewer if ctx
// ended first).
func watchRoutes(ctx context.Context, t *testing.T, st store.Store, orgID string, ids []string, held []int, victim string, t0 time.Time) <-chan []time.Duration {
	out := make(chan []time.Duration, 1)
	want := make(map[string]bool, len(held))
	for _, i := range held {
		want[ids[i]] = true
	}
	go func() {
		var seen []time.Duration
		defer func() { slices.Sort(seen); out <- seen }()
		for len(want) > 0 {
			rs, err := st.ListRoutes(ctx, orgID, time.Now().Add(-5*time.Second))
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("routes: %v", err)
				}
				return
			}
			at := time.Since(t0)
			for _, r := range rs {
				if want[r.MachineID] && r.ReplicaID != victim {
					delete(want, r.MachineID)
					seen = append(seen, at)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return out
}

// waitRoutes waits until all n machines of the org have a live route and
// returns the replica holding each.
func waitRoutes(t *testing.T, st store.Store, orgID string, n int, within time.Duration) map[string]string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		rs, err := st.ListRoutes(t.Context(), orgID, time.Now().Add(-5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == n {
			m := make(map[string]string, n)
			for _, r := range rs {
				m[r.MachineID] = r.ReplicaID
			}
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d machines routed within %s", len(rs), n, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func replicaAt(reps []store.Replica, p *hubProc) string {
	for _, r := range reps {
		if r.Addr == p.internal {
			return r.ID
		}
	}
	return ""
}

// tail is the end of b, at most n bytes.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
