package hub_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/agentd"
	"github.com/devdepot-ai/agentd/internal/ctl"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/testca"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
	"github.com/devdepot-ai/agentd/transport"
)

// hubEnv is a real hub on a loopback port with a SQLite store, and an
// owner token of its first org.
type hubEnv struct {
	t     *testing.T
	hub   *hubtest.Hub
	ca    *testca.CA // set: the hub serves TLS with a certificate this CA signed
	store store.Store
	addr  string
	url   string
	owner string
	stop  func()
}

func startHub(t *testing.T) *hubEnv { return startHubTLS(t, nil) }

func startHubTLS(t *testing.T, ca *testca.CA) *hubEnv {
	t.Helper()
	opts := hubtest.Options{}
	if ca != nil {
		opts.TLS = ca.Server
	}
	hb := hubtest.Start(t, opts)
	h := &hubEnv{t: t, hub: hb, ca: ca, store: hb.Store, owner: hb.Token}
	h.sync()
	return h
}

// serve starts a hub process on addr (the same address again after a restart).
func (h *hubEnv) serve(addr string) {
	h.t.Helper()
	h.hub.Serve(addr)
	h.sync()
}

func (h *hubEnv) sync() { h.addr, h.url, h.stop = h.hub.Addr, h.hub.URL, h.hub.Stop }

func (h *hubEnv) conn() *grpc.ClientConn {
	creds := insecure.NewCredentials()
	if h.ca != nil {
		creds = credentials.NewTLS(&tls.Config{RootCAs: h.ca.Pool, MinVersion: tls.VersionTLS12})
	}
	cc, err := grpc.NewClient(h.addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { cc.Close() })
	return cc
}

func authCtx(ctx context.Context, token, machine string) context.Context {
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	if machine != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "agentd-machine", machine)
	}
	return ctx
}

func (h *hubEnv) pairCode(token string) string {
	h.t.Helper()
	resp, err := hubv1.NewAdminServiceClient(h.conn()).CreatePairingCode(authCtx(h.t.Context(), token, ""), &hubv1.CreatePairingCodeRequest{})
	if err != nil {
		h.t.Fatal(err)
	}
	return resp.GetCode()
}

// machine is a real agentd paired with the hub and running.
type machine struct {
	id   string
	ws   string
	cfg  string   // config dir: machine id and key
	env  []string // its commands' environment (nil: this process's)
	old  bool     // a daemon of before byte streams (agentd.Options.NoByteStreams)
	stop func()
}

func (h *hubEnv) startMachine(token string) *machine {
	h.t.Helper()
	return h.startMachineEnv(token, nil)
}

// startShellMachine is startMachine whose commands' login shell is
// /bin/sh with a HOME of its own: a terminal test types into a shell,
// and this host's root profile (pyenv's prompt hook among it) can keep a
// login bash from reading anything for longer than a test waits under load.
func (h *hubEnv) startShellMachine(token string) *machine {
	h.t.Helper()
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "SHELL=") || strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "ENV=")
	})
	return h.startMachineEnv(token, append(env, "SHELL=/bin/sh", "HOME="+h.t.TempDir()))
}

func (h *hubEnv) startMachineEnv(token string, env []string) *machine {
	h.t.Helper()
	return h.startMachineWith(token, &machine{env: env})
}

// startMachineWith pairs and runs a daemon as mc says (env, old).
func (h *hubEnv) startMachineWith(token string, mc *machine) *machine {
	h.t.Helper()
	dir := h.t.TempDir()
	cfg, ws := filepath.Join(dir, "config"), filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		h.t.Fatal(err)
	}
	caFile := ""
	if h.ca != nil {
		caFile = filepath.Join(dir, "ca.pem")
		if err := os.WriteFile(caFile, h.ca.PEM, 0o600); err != nil {
			h.t.Fatal(err)
		}
	}
	m, err := agentd.Pair(h.t.Context(), agentd.PairOptions{Hub: h.url, Code: h.pairCode(token), ConfigDir: cfg, Name: "box", CAFile: caFile})
	if err != nil {
		h.t.Fatal(err)
	}
	mc.id, mc.ws, mc.cfg = m.MachineID, ws, cfg
	h.run(token, mc, filepath.Join(dir, "state"))
	return mc
}

// run runs the paired machine's daemon with the given state directory.
func (h *hubEnv) run(token string, mc *machine, stateDir string) {
	h.t.Helper()
	env := mc.env
	if env == nil {
		env = os.Environ()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- agentd.Run(ctx, agentd.RunOptions{
			Server: agentd.Options{Workspace: mc.ws, StateDir: stateDir, Env: env, Logger: zaptest.NewLogger(h.t).Named("agentd"),
				NoByteStreams: mc.old},
			ConfigDir: mc.cfg, Socket: "-",
			Backoff: transport.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond, Rejected: time.Hour},
		})
	}()
	stopped := false
	mc.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	h.t.Cleanup(mc.stop)
	h.waitStatus(token, mc.id, hubv1.MachineStatus_MACHINE_STATUS_ONLINE)
}

func (h *hubEnv) waitStatus(token, id string, want hubv1.MachineStatus) {
	h.t.Helper()
	cc := h.conn()
	deadline := time.Now().Add(10 * time.Second)
	var last hubv1.MachineStatus
	for time.Now().Before(deadline) {
		resp, err := hubv1.NewAdminServiceClient(cc).ListMachines(authCtx(h.t.Context(), token, ""), &hubv1.ListMachinesRequest{})
		if err == nil {
			for _, m := range resp.GetMachines() {
				if m.GetId() == id {
					last = m.GetStatus()
				}
			}
		}
		if last == want {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.t.Fatalf("machine %s is %v, want %v", id, last, want)
}

// agentctl runs agentctl in-process against the hub.
func (h *hubEnv) agentctl(token, machine string, args ...string) (int, string, string) {
	h.t.Helper()
	tf := filepath.Join(h.t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(token), 0o600); err != nil {
		h.t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := ctl.Main(h.t.Context(), append([]string{"--hub", h.url, "--machine", machine, "--token-file", tf}, args...),
		ctl.IO{In: strings.NewReader(""), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

func TestPairRunExecThroughHub(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	m := h.startMachine(h.owner)

	code, out, errs := h.agentctl(h.owner, m.id, "sh", "echo hello from $(basename $PWD); echo oops >&2; exit 3")
	if code != 3 || out != "hello from ws\n" || errs != "oops\n" {
		t.Fatalf("sh through the hub = %d %q %q, want 3 'hello from ws' 'oops'", code, out, errs)
	}
	if code, out, errs := h.agentctl(h.owner, m.id, "validate"); code != 0 {
		t.Errorf("validate through the hub failed:\n%s%s", out, errs)
	}

	// The org's activity has the command, in the hub's own record, with
	// the token's name as actor and the exit code read from the stream.
	st, err := hubv1.NewActivityServiceClient(h.conn()).Watch(authCtx(t.Context(), h.owner, ""), &hubv1.WatchRequest{Tail: 1000, NoFollow: true})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	deadline := time.Now().Add(5 * time.Second)
	for !found && time.Now().Before(deadline) {
		for {
			r, err := st.Recv()
			if err != nil {
				break
			}
			if r.GetSource() == "hub" && r.GetRecord().GetKind() == "call" && strings.Contains(r.GetRecord().GetCommand(), "hello from") &&
				r.GetRecord().GetActor() == "tester" && r.GetRecord().GetExitCode() == 3 {
				found = true
			}
		}
		if !found {
			time.Sleep(50 * time.Millisecond)
			st, _ = hubv1.NewActivityServiceClient(h.conn()).Watch(authCtx(t.Context(), h.owner, ""), &hubv1.WatchRequest{Tail: 1000, NoFollow: true})
		}
	}
	if !found {
		t.Error("hub activity has no record of its own of the command by actor tester, exit 3")
	}
}

func TestAuthAndIsolation(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	m := h.startMachine(h.owner)
	cc := h.conn()
	sys := agentdv1.NewSystemServiceClient(cc)

	// Another org's admin cannot see the machine.
	o2, err := h.store.CreateOrg(t.Context(), "other", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	other, hash := store.NewToken()
	if _, err := h.store.CreateToken(t.Context(), store.Token{OrgID: o2.ID, Name: "eve", Role: store.RoleAdmin, Hash: hash, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		ctx  context.Context
		want codes.Code
	}{
		"no token":      {metadata.AppendToOutgoingContext(t.Context(), "agentd-machine", m.id), codes.Unauthenticated},
		"bad token":     {authCtx(t.Context(), "agt_nope", m.id), codes.Unauthenticated},
		"guessed token": {authCtx(t.Context(), "agt_"+strings.Repeat("A", 43), m.id), codes.Unauthenticated},
		"other org":     {authCtx(t.Context(), other, m.id), codes.NotFound},
		"unknown":       {authCtx(t.Context(), h.owner, "m-doesnotexist"), codes.NotFound},
		// No machine: the org's default environment, builtin, which a hub
		// without a Docker engine cannot run (and never runs elsewhere).
		"no machine":      {authCtx(t.Context(), h.owner, ""), codes.FailedPrecondition},
		"machine and env": {metadata.AppendToOutgoingContext(authCtx(t.Context(), h.owner, m.id), "agentd-environment", "builtin"), codes.InvalidArgument},
		"right org, ok ":  {authCtx(t.Context(), h.owner, m.id), codes.OK},
	} {
		_, err := sys.Info(tc.ctx, &agentdv1.InfoRequest{})
		if status.Code(err) != tc.want {
			t.Errorf("%s: Info = %v, want %v", name, err, tc.want)
		}
	}
	resp, err := hubv1.NewAdminServiceClient(cc).ListMachines(authCtx(t.Context(), other, ""), &hubv1.ListMachinesRequest{})
	if err != nil || len(resp.GetMachines()) != 0 {
		t.Errorf("other org lists %v (%v), want none", resp.GetMachines(), err)
	}
	if _, err := hubv1.NewAdminServiceClient(cc).RevokeMachine(authCtx(t.Context(), other, ""), &hubv1.RevokeMachineRequest{Id: m.id}); status.Code(err) != codes.NotFound {
		t.Errorf("other org revoking the machine = %v, want NotFound", err)
	}
}

func TestOfflineAndRevoke(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	m := h.startMachine(h.owner)
	sys := agentdv1.NewSystemServiceClient(h.conn())
	ctx := authCtx(t.Context(), h.owner, m.id)

	// Revoke closes the live tunnel at once; calls are refused after.
	start := time.Now()
	if _, err := hubv1.NewAdminServiceClient(h.conn()).RevokeMachine(authCtx(t.Context(), h.owner, ""), &hubv1.RevokeMachineRequest{Id: m.id}); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(h.owner, m.id, hubv1.MachineStatus_MACHINE_STATUS_REVOKED)
	if _, err := sys.Info(ctx, &agentdv1.InfoRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("Info on a revoked machine = %v, want FailedPrecondition", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("revoke took %s to take effect, want ≤ 1s", d)
	}

	// A second machine that stops is offline, with its last-seen time.
	m2 := h.startMachine(h.owner)
	m2.stop()
	h.waitStatus(h.owner, m2.id, hubv1.MachineStatus_MACHINE_STATUS_OFFLINE)
	_, err := sys.Info(authCtx(t.Context(), h.owner, m2.id), &agentdv1.InfoRequest{})
	if status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "offline (last seen") {
		t.Errorf("Info on an offline machine = %v, want Unavailable 'offline (last seen …)'", err)
	}

	// A used pairing code does not pair again.
	code := h.pairCode(h.owner)
	cfg := t.TempDir()
	if _, err := agentd.Pair(t.Context(), agentd.PairOptions{Hub: h.url, Code: code, ConfigDir: filepath.Join(cfg, "a")}); err != nil {
		t.Fatal(err)
	}
	if _, err := agentd.Pair(t.Context(), agentd.PairOptions{Hub: h.url, Code: code, ConfigDir: filepath.Join(cfg, "b")}); err == nil {
		t.Error("pairing twice with one code succeeded")
	}
}

// TestHubRestartMidCommand: the hub dies while a command runs; the command
// keeps running, the daemon reconnects to the new hub, and Attach from
// offset 0 through the hub returns every byte.
func TestHubRestartMidCommand(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	m := h.startMachine(h.owner)
	code, out, errs := h.agentctl(h.owner, m.id, "exec", "-d", "--", "sh", "-c", "for i in $(seq 1 30); do echo line $i; sleep 0.05; done")
	if code != 0 {
		t.Fatalf("exec -d: %d %s", code, errs)
	}
	id := strings.TrimSpace(out)
	time.Sleep(200 * time.Millisecond) // a few lines before the hub goes away
	addr := h.addr
	h.stop()
	h.serve(addr)
	h.waitStatus(h.owner, m.id, hubv1.MachineStatus_MACHINE_STATUS_ONLINE)
	code, out, errs = h.agentctl(h.owner, m.id, "attach", id)
	if code != 0 {
		t.Fatalf("attach after restart: %d %s", code, errs)
	}
	var want strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	if out != want.String() {
		t.Errorf("attach after a hub restart returned %q, want all 30 lines", out)
	}
}

func TestPairEndpointBadInput(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	key := strings.Repeat("Q", 43) + "=" // 32 bytes of base64, not all zero
	for name, tc := range map[string]struct {
		body string
		want int
	}{
		"truncated":     {`{"code": "ABCD-`, 400},
		"wrong types":   {`{"code": 12, "public_key": true}`, 400},
		"unknown field": {`{"code": "ABCD-EFGH", "admin": true}`, 400},
		"two objects":   {`{"code": "ABCD-EFGH"} {}`, 400},
		"huge":          {`{"code": "` + strings.Repeat("x", 1<<20) + `"}`, 413},
		"bad key":       {`{"code": "ABCD-EFGH", "public_key": "AAAA", "hostname": "h"}`, 400},
		"wrong code":    {`{"code": "ABCD-EFGH", "public_key": "` + key + `", "hostname": "h", "os": "linux", "arch": "amd64"}`, 403},
	} {
		resp, err := http.Post(h.url+"/v1/pair", "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var pe struct {
			Error string `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&pe)
		resp.Body.Close()
		if resp.StatusCode != tc.want || pe.Error == "" {
			t.Errorf("%s: status %d, error %q; want %d with a message", name, resp.StatusCode, pe.Error, tc.want)
		}
	}
	// Nothing was paired.
	resp, err := hubv1.NewAdminServiceClient(h.conn()).ListMachines(authCtx(t.Context(), h.owner, ""), &hubv1.ListMachinesRequest{})
	if err != nil || len(resp.GetMachines()) != 0 {
		t.Errorf("machines after bad pairing requests: %v (%v)", resp.GetMachines(), err)
	}
	// The health and metrics endpoints answer.
	for _, p := range []string{"/healthz", "/metrics"} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, h.url+p, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+h.owner)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("GET %s = %v %v", p, resp, err)
		}
		if resp != nil {
			resp.Body.Close()
		}
	}
}

// TestTLSEndToEnd: pairing, the tunnel (wss) and routed calls over TLS with
// a certificate from a CA the test made, on a hub that also speaks HTTP/2.
func TestTLSEndToEnd(t *testing.T) {
	t.Parallel()
	h := startHubTLS(t, testca.New(t))
	m := h.startMachine(h.owner)
	info, err := agentdv1.NewSystemServiceClient(h.conn()).Info(authCtx(t.Context(), h.owner, m.id), &agentdv1.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.GetWorkspace() != m.ws || info.GetTunnel().GetState() != "connected" || !strings.HasPrefix(info.GetTunnel().GetHub(), "wss://") {
		t.Errorf("Info through the TLS hub = %v", info)
	}
	// A client that does not trust the CA is refused.
	cc, err := grpc.NewClient(h.addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := agentdv1.NewSystemServiceClient(cc).Info(authCtx(t.Context(), h.owner, m.id), &agentdv1.InfoRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("Info from a client without the CA = %v, want a TLS failure (Unavailable)", err)
	}
}

// A daemon that comes back without its state directory (a sandbox
// restarted from its image) starts a new audit log; the hub, resuming after
// the last sequence number it stored, still gets every new record.
func TestActivityAfterStateLoss(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	m := h.startMachine(h.owner)
	hasRecord := func(marker string) bool {
		st, err := hubv1.NewActivityServiceClient(h.conn()).Watch(authCtx(t.Context(), h.owner, ""), &hubv1.WatchRequest{Tail: 1000, NoFollow: true})
		if err != nil {
			t.Fatal(err)
		}
		for {
			r, err := st.Recv()
			if err != nil {
				return false
			}
			if r.GetRecord().GetKind() == "process.exit" && strings.Contains(r.GetRecord().GetCommand(), marker) {
				return true
			}
		}
	}
	waitRecord := func(marker string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if hasRecord(marker) {
				return
			}
		}
		t.Fatalf("hub activity has no exit record of the command %q", marker)
	}
	for i := range 5 { // the old life's log numbers past the new one's first record if it starts at 1
		if code, _, errs := h.agentctl(h.owner, m.id, "sh", fmt.Sprintf("echo before-%d", i)); code != 0 {
			t.Fatalf("sh: %d %s", code, errs)
		}
	}
	waitRecord("before-4")
	m.stop()
	h.waitStatus(h.owner, m.id, hubv1.MachineStatus_MACHINE_STATUS_OFFLINE)

	h.run(h.owner, m, filepath.Join(t.TempDir(), "fresh-state"))
	if code, _, errs := h.agentctl(h.owner, m.id, "sh", "echo after-loss"); code != 0 {
		t.Fatalf("sh after the restart: %d %s", code, errs)
	}
	waitRecord("after-loss")
}
