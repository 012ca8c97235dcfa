package ctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/devdepot-ai/agentd/internal/ctl"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// call is one RPC the fake hub received.
type call struct {
	method string
	md     metadata.MD
	req    any
}

// fakeHub serves EnvironmentService with canned environments, and
// agentd.v1 SystemService as the routed agentd, on a loopback listener. It
// records every call.
type fakeHub struct {
	hubv1.UnimplementedEnvironmentServiceServer
	agentdv1.UnimplementedSystemServiceServer

	url, tokenFile string

	mu    sync.Mutex
	calls []call
	envs  map[string][]*hubv1.Environment // GetEnvironment answers in turn; the last repeats
	gets  map[string]int
}

var _ hubv1.EnvironmentServiceServer = (*fakeHub)(nil)

func startFakeHub(t *testing.T) *fakeHub {
	t.Helper()
	f := &fakeHub{envs: cannedEnvs(), gets: map[string]int{}}
	f.tokenFile = filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f.tokenFile, []byte("tok-test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		f.mu.Lock()
		f.calls = append(f.calls, call{info.FullMethod, md, req})
		f.mu.Unlock()
		if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer tok-test" {
			return nil, status.Errorf(codes.Unauthenticated, "authorization = %q", got)
		}
		return h(ctx, req)
	}))
	hubv1.RegisterEnvironmentServiceServer(srv, f)
	agentdv1.RegisterSystemServiceServer(srv, f)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		// A test that makes no call may stop the server before Serve starts.
		if err := <-done; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("Serve: %v", err)
		}
	})
	f.url = "http://" + lis.Addr().String()
	return f
}

// run runs agentctl against the fake hub; the routing flags start empty
// whatever the environment says.
func (f *fakeHub) run(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	base := []string{"--addr=", "--machine=", "--env=", "--conversation=", "--hub", f.url, "--token-file", f.tokenFile}
	code := ctl.Main(t.Context(), append(base, args...), ctl.IO{In: strings.NewReader(""), Out: &out, Err: &errb})
	return result{code, out.String(), errb.String()}
}

// takeCalls returns the calls so far and forgets them.
func (f *fakeHub) takeCalls() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

var hoursAgo = timestamppb.New(time.Now().Add(-3*time.Hour - time.Minute))

func cannedEnvs() map[string][]*hubv1.Environment {
	ready := hubv1.EnvironmentState_ENVIRONMENT_STATE_READY
	validating := hubv1.EnvironmentState_ENVIRONMENT_STATE_VALIDATING
	rejected := hubv1.EnvironmentState_ENVIRONMENT_STATE_REJECTED
	image := hubv1.EnvironmentKind_ENVIRONMENT_KIND_IMAGE
	bad := &hubv1.Environment{
		Name: "bad", Kind: image, State: rejected, Image: "ghcr.io/acme/bad:v1", Network: "none", Isolation: "runc",
		Reason: "sandbox.uid: runs as root", Updated: hoursAgo,
		Report: []*hubv1.Check{
			{Id: "reference.registry", Status: hubv1.CheckStatus_CHECK_STATUS_PASS, Title: "the reference names a registry"},
			{Id: "image.size", Status: hubv1.CheckStatus_CHECK_STATUS_WARN, Title: "image under 2 GiB", Breaks: "slow first start", Fix: "use a slim base"},
			{Id: "sandbox.uid", Status: hubv1.CheckStatus_CHECK_STATUS_FAIL, Title: "runs as uid 1000", Breaks: "files the agent writes are owned by root", Fix: "add USER 1000 to the Dockerfile"},
		},
		Inventory: &hubv1.Inventory{Tools: []string{"jq", "rg"}, PythonPackages: []string{"numpy==2.1.0"}},
	}
	return map[string][]*hubv1.Environment{
		"builtin": {{Name: "builtin", Kind: hubv1.EnvironmentKind_ENVIRONMENT_KIND_BUILTIN, State: ready, Image: "ghcr.io/devdepot-ai/sandbox-base:1", Isolation: "runc"}},
		"py": {{
			Name: "py", Kind: image, State: ready, Default: true, Image: "ghcr.io/acme/py:v1", Network: "public", Isolation: "gvisor",
			Pinned: "ghcr.io/acme/py@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Updated: hoursAgo,
		}},
		"bad":   {bad},
		"m-abc": {{Name: "m-abc", Kind: hubv1.EnvironmentKind_ENVIRONMENT_KIND_MACHINE}},
		"slow": {
			{Name: "slow", Kind: image, State: validating, Reason: "pulling ghcr.io/acme/slow:v1"},
			{Name: "slow", Kind: image, State: validating, Reason: "running checks"},
			{Name: "slow", Kind: image, State: ready, Pinned: "ghcr.io/acme/slow@sha256:aa"},
		},
		"doomed": {
			{Name: "doomed", Kind: image, State: validating, Reason: "running checks"},
			bad,
		},
		"stuck": {{Name: "stuck", Kind: image, State: validating, Reason: "pulling"}},
	}
}

func (f *fakeHub) ListEnvironments(context.Context, *hubv1.ListEnvironmentsRequest) (*hubv1.ListEnvironmentsResponse, error) {
	resp := &hubv1.ListEnvironmentsResponse{}
	for _, n := range []string{"builtin", "py", "bad", "m-abc"} {
		resp.Environments = append(resp.Environments, f.envs[n][0])
	}
	return resp, nil
}

func (f *fakeHub) GetEnvironment(_ context.Context, req *hubv1.GetEnvironmentRequest) (*hubv1.GetEnvironmentResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	seq, ok := f.envs[req.GetName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "environment %s not found", req.GetName())
	}
	i := min(f.gets[req.GetName()], len(seq)-1)
	f.gets[req.GetName()]++
	return &hubv1.GetEnvironmentResponse{Environment: seq[i]}, nil
}

func (f *fakeHub) CreateEnvironment(_ context.Context, req *hubv1.CreateEnvironmentRequest) (*hubv1.CreateEnvironmentResponse, error) {
	return &hubv1.CreateEnvironmentResponse{Environment: &hubv1.Environment{
		Name: req.GetName(), Kind: hubv1.EnvironmentKind_ENVIRONMENT_KIND_IMAGE, State: hubv1.EnvironmentState_ENVIRONMENT_STATE_VALIDATING,
		Image: req.GetImage(), Network: req.GetNetwork(),
	}}, nil
}

func (f *fakeHub) SetDefaultEnvironment(context.Context, *hubv1.SetDefaultEnvironmentRequest) (*hubv1.SetDefaultEnvironmentResponse, error) {
	return &hubv1.SetDefaultEnvironmentResponse{}, nil
}

func (f *fakeHub) ListSandboxes(_ context.Context, req *hubv1.ListSandboxesRequest) (*hubv1.ListSandboxesResponse, error) {
	all := []*hubv1.Sandbox{
		{Id: "sb-1", Environment: "py", Conversation: "c-42", State: "running", Online: true, Created: hoursAgo, LastUsed: hoursAgo, Image: "sha256:1a2b"},
		{Id: "sb-2", Environment: "py", State: "running", Online: true, Created: hoursAgo, Image: "sha256:1a2b"},
		{Id: "sb-3", Environment: "builtin", Conversation: "c-7", State: "failed", Error: "image pull failed"},
	}
	resp := &hubv1.ListSandboxesResponse{}
	for _, s := range all {
		if req.GetEnvironment() == "" || s.GetEnvironment() == req.GetEnvironment() {
			resp.Sandboxes = append(resp.Sandboxes, s)
		}
	}
	return resp, nil
}

func (f *fakeHub) RemoveSandbox(_ context.Context, req *hubv1.RemoveSandboxRequest) (*hubv1.RemoveSandboxResponse, error) {
	if req.GetId() == "sb-gone" {
		return nil, status.Error(codes.NotFound, "sandbox sb-gone not found")
	}
	return &hubv1.RemoveSandboxResponse{}, nil
}

func (f *fakeHub) Info(context.Context, *agentdv1.InfoRequest) (*agentdv1.InfoResponse, error) {
	return &agentdv1.InfoResponse{Mode: "sandbox"}, nil
}

func TestEnvLsAndShow(t *testing.T) {
	t.Parallel()
	f := startFakeHub(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"env ls", []string{"env", "ls"}, `NAME     KIND     STATE     DEFAULT  ISOLATION  IMAGE                                   UPDATED
builtin  builtin  ready              runc       ghcr.io/devdepot-ai/sandbox-base:1      never
py       image    ready     *        gvisor     ghcr.io/acme/py:v1@sha256:0123456789ab  3h ago
bad      image    rejected           runc       ghcr.io/acme/bad:v1                     3h ago
m-abc    machine  -                  -          -                                       never
`},
		{"env show ready", []string{"env", "show", "py"}, `name:      py
kind:      image
state:     ready (default)
image:     ghcr.io/acme/py:v1
pinned:    ghcr.io/acme/py@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
network:   public
isolation: gvisor
updated:   3h ago
`},
		{"env show rejected", []string{"env", "show", "bad"}, `name:      bad
kind:      image
state:     rejected
image:     ghcr.io/acme/bad:v1
reason:    sandbox.uid: runs as root
network:   none
isolation: runc
updated:   3h ago

PASS  reference.registry  the reference names a registry
WARN  image.size  image under 2 GiB
      breaks: slow first start
      fix: use a slim base
FAIL  sandbox.uid  runs as uid 1000
      breaks: files the agent writes are owned by root
      fix: add USER 1000 to the Dockerfile

What the image adds:
  tools: jq, rg
  python packages: numpy==2.1.0
`},
		{"sandbox ls", []string{"sandbox", "ls"}, `ID    ENV      CONVERSATION  STATE    ONLINE  CREATED  LAST USED  NEXT  SIZE  IMAGE
sb-1  py       c-42          running  yes     3h ago   3h ago     -     -     sha256:1a2b
sb-2  py       (pool)        running  yes     3h ago   never      -     -     sha256:1a2b
sb-3  builtin  c-7           failed   no      never    never      -     -     -
`},
		{"sandbox ls --env", []string{"sandbox", "ls", "--env", "builtin"}, `ID    ENV      CONVERSATION  STATE   ONLINE  CREATED  LAST USED  NEXT  SIZE  IMAGE
sb-3  builtin  c-7           failed  no      never    never      -     -     -
`},
	}
	for _, tt := range tests {
		got := f.run(t, tt.args...)
		if diff := cmp.Diff(got, result{0, tt.want, ""}, cmp.AllowUnexported(result{})); diff != "" {
			t.Errorf("agentctl %v (-got +want):\n%s", tt.args, diff)
		}
	}
}

func TestEnvShowJSON(t *testing.T) {
	t.Parallel()
	f := startFakeHub(t)
	r := f.run(t, "--json", "env", "show", "bad")
	var got struct {
		Name   string `json:"name"`
		Report []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			Fix    string `json:"fix"`
		} `json:"report"`
		Inventory struct {
			Tools          []string `json:"tools"`
			PythonPackages []string `json:"python_packages"`
		} `json:"inventory"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.code != 0 {
		t.Fatalf("--json env show = %+v (%v)", r, err)
	}
	if got.Name != "bad" || len(got.Report) != 3 || got.Report[2].Status != "fail" || got.Report[2].Fix == "" ||
		len(got.Inventory.Tools) != 2 || len(got.Inventory.PythonPackages) != 1 {
		t.Errorf("--json env show = %s", r.stdout)
	}
	// The list: the same words, not the proto's enum names.
	r = f.run(t, "--json", "env", "ls")
	var list struct {
		Environments []struct{ Name, Kind, State string } `json:"environments"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Environments) == 0 {
		t.Fatalf("--json env ls = %+v (%v)", r, err)
	}
	for _, e := range list.Environments {
		if strings.Contains(e.State+e.Kind, "_") || e.State == "" {
			t.Errorf("--json env ls: %s has kind %q state %q, want words like image, ready", e.Name, e.Kind, e.State)
		}
	}
}

func TestEnvWait(t *testing.T) {
	t.Parallel()
	f := startFakeHub(t)

	r := f.run(t, "env", "wait", "slow")
	want := "slow: validating: pulling ghcr.io/acme/slow:v1\nslow: validating: running checks\nslow: ready\n"
	if diff := cmp.Diff(r, result{0, "", want}, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("env wait on VALIDATING→READY (-got +want):\n%s", diff)
	}

	r = f.run(t, "env", "wait", "doomed")
	if r.code != 1 || r.stdout != "" {
		t.Errorf("env wait on VALIDATING→REJECTED = %+v, want exit 1", r)
	}
	for _, s := range []string{"doomed: validating: running checks\n", "FAIL  sandbox.uid  runs as uid 1000\n", "fix: add USER 1000 to the Dockerfile\n", "rejected"} {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("env wait on REJECTED: stderr lacks %q:\n%s", s, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "image.size") || strings.Contains(r.stderr, "reference.registry") {
		t.Errorf("env wait on REJECTED printed checks that did not fail:\n%s", r.stderr)
	}

	r = f.run(t, "env", "wait", "stuck", "--timeout", "700ms")
	if r.code != 1 || !strings.Contains(r.stderr, "still validating after 700ms") {
		t.Errorf("env wait past --timeout = %+v, want exit 1 saying it is still validating", r)
	}
	if r = f.run(t, "env", "wait", "nope"); r.code != 1 || !strings.Contains(r.stderr, "environment nope not found") {
		t.Errorf("env wait on an unknown environment = %+v, want exit 1 with the hub's message", r)
	}
}

func TestEnvCreateAndQuietCommands(t *testing.T) {
	t.Parallel()
	f := startFakeHub(t)
	r := f.run(t, "env", "create", "py2", "--image", "ghcr.io/acme/py:v2", "--network", "none")
	want := result{0, "", "validating py2: follow with 'agentctl env wait py2'\n"}
	if diff := cmp.Diff(r, want, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("env create (-got +want):\n%s", diff)
	}
	calls := f.takeCalls()
	if len(calls) != 1 {
		t.Fatalf("env create made %d calls, want 1", len(calls))
	}
	req, _ := calls[0].req.(*hubv1.CreateEnvironmentRequest)
	if req.GetName() != "py2" || req.GetImage() != "ghcr.io/acme/py:v2" || req.GetNetwork() != "none" {
		t.Errorf("CreateEnvironment request = %v", req)
	}
	r = f.run(t, "--json", "env", "create", "py3", "--image", "ghcr.io/acme/py:v3")
	var env struct{ Name, Network, State string }
	if err := json.Unmarshal([]byte(r.stdout), &env); err != nil || env.Name != "py3" || env.Network != "public" || env.State != "validating" {
		t.Errorf("--json env create = %+v (%v), want the environment, network public", r, err)
	}

	for _, args := range [][]string{{"env", "default", "py"}, {"sandbox", "rm", "sb-1"}, {"sandbox", "rm", "sb-1", "sb-2"}} {
		if r := f.run(t, args...); r != (result{0, "", ""}) {
			t.Errorf("agentctl %v = %+v, want exit 0 and no output", args, r)
		}
	}
	f.takeCalls()
	r = f.run(t, "sandbox", "rm", "sb-gone", "sb-2")
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "sb-gone: sandbox sb-gone not found") {
		t.Errorf("sandbox rm with an unknown id = %+v, want exit 1 naming it", r)
	}
	var ids []string
	for _, c := range f.takeCalls() {
		ids = append(ids, c.req.(*hubv1.RemoveSandboxRequest).GetId())
	}
	if diff := cmp.Diff(ids, []string{"sb-gone", "sb-2"}); diff != "" {
		t.Errorf("sandbox rm sb-gone sb-2: RemoveSandbox calls (-got +want):\n%s", diff)
	}
}

func TestEnvUsageErrorsSendNothing(t *testing.T) {
	t.Parallel()
	f := startFakeHub(t)
	for _, args := range [][]string{
		{"env", "show"},
		{"env", "show", ""},
		{"env", "show", "a", "b"},
		{"env", "create", "x"},
		{"env", "create", "--image", "ghcr.io/acme/x:1"},
		{"env", "create", "x", "--image", "ghcr.io/acme/x:1", "--network", "host"},
		{"env", "wait", "x", "--timeout", "0s"},
		{"env", "update"},
		{"env", "revalidate"},
		{"env", "default"},
		{"env", "rm"},
		{"env", "ls", "extra"},
		{"sandbox", "rm"},
		{"--machine", "m-1", "--env", "py", "info"},
	} {
		r := f.run(t, args...)
		if r.code != ctl.ExitUsage || r.stdout != "" || r.stderr == "" {
			t.Errorf("agentctl %q = %+v, want exit 2 with a message", args, r)
		}
		if calls := f.takeCalls(); len(calls) != 0 {
			t.Errorf("agentctl %q made %d calls, want none", args, len(calls))
		}
	}
}

func TestHubRoutingMetadata(t *testing.T) {
	t.Parallel()
	f := startFakeHub(t)
	keys := []string{"agentd-machine", "agentd-environment", "agentd-conversation"}
	tests := []struct {
		args []string
		want map[string]string
	}{
		{[]string{"--env", "py", "--conversation", "c-42", "info"}, map[string]string{"agentd-environment": "py", "agentd-conversation": "c-42"}},
		{[]string{"--env", "py", "info"}, map[string]string{"agentd-environment": "py"}},
		{[]string{"--machine", "sb-1", "info"}, map[string]string{"agentd-machine": "sb-1"}},
		{[]string{"--conversation", "c-7", "info"}, map[string]string{"agentd-conversation": "c-7"}}, // the org's default environment
		{[]string{"info"}, map[string]string{}},
		// The hub's own services get no routing metadata.
		{[]string{"--env", "py", "--conversation", "c-42", "env", "ls"}, map[string]string{}},
	}
	for _, tt := range tests {
		if r := f.run(t, tt.args...); r.code != 0 {
			t.Errorf("agentctl %v = %+v", tt.args, r)
			continue
		}
		calls := f.takeCalls()
		if len(calls) != 1 {
			t.Errorf("agentctl %v made %d calls, want 1", tt.args, len(calls))
			continue
		}
		got := map[string]string{}
		for _, k := range keys {
			if v := calls[0].md.Get(k); len(v) > 0 {
				got[k] = strings.Join(v, ",")
			}
		}
		if diff := cmp.Diff(got, tt.want); diff != "" {
			t.Errorf("agentctl %v: metadata of %s (-got +want):\n%s", tt.args, calls[0].method, diff)
		}
	}
}
