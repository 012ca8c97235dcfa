package hub_test

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/internal/hub/archive"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// testRegistry is an in-process registry on a loopback port, which the
// Docker engine here pulls from (127.0.0.0/8 is plain http to it).
type testRegistry struct {
	host string // 127.0.0.1:PORT

	mu   sync.Mutex
	tags []string // pushed, removed from the engine at the end
}

func startTestRegistry(t *testing.T) *testRegistry {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	r := &testRegistry{host: strings.TrimPrefix(srv.URL, "http://")}
	if onKube() {
		sandboxtest.RemoveKubeImagesOf(t, "", r.host) // what the node's kubelet pulled from it
	}
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.tags) > 0 {
			_ = exec.Command("docker", append([]string{"rmi", "--force"}, r.tags...)...).Run()
		}
	})
	return r
}

// build builds a Dockerfile (with files beside it) on the engine and
// pushes it to the registry as repo:tag; returns the reference.
func (r *testRegistry) build(t *testing.T, repoTag, dockerfile string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ref := r.host + "/" + repoTag
	r.mu.Lock()
	r.tags = append(r.tags, ref)
	r.mu.Unlock()
	dockerCLI(t, "build", "-q", "-t", ref, dir)
	dockerCLI(t, "push", "-q", ref)
	return ref
}

func dockerCLI(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("docker", args...)
	cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// waitEnv waits for an environment to leave validating.
func (h *sandboxHub) waitEnv(name string, timeout time.Duration) *hubv1.Environment {
	h.t.Helper()
	envs := hubv1.NewEnvironmentServiceClient(h.cc)
	deadline := time.Now().Add(timeout)
	for {
		resp, err := envs.GetEnvironment(h.ctx("", ""), &hubv1.GetEnvironmentRequest{Name: name})
		if err != nil {
			h.t.Fatalf("environment %s: %v", name, err)
		}
		e := resp.GetEnvironment()
		if e.GetState() != hubv1.EnvironmentState_ENVIRONMENT_STATE_VALIDATING && !strings.HasPrefix(e.GetReason(), "revalidating") {
			return e
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("environment %s still validating after %s: %s", name, timeout, e.GetReason())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// failed returns the report's failed check with that id, or nil.
func failed(e *hubv1.Environment, id string) *hubv1.Check {
	for _, c := range e.GetReport() {
		if c.GetId() == id && c.GetStatus() == hubv1.CheckStatus_CHECK_STATUS_FAIL {
			return c
		}
	}
	return nil
}

func reportText(e *hubv1.Environment) string {
	var b strings.Builder
	for _, c := range e.GetReport() {
		b.WriteString(c.GetStatus().String() + " " + c.GetId() + ": " + c.GetBreaks() + " | " + c.GetFix() + "\n")
	}
	return b.String()
}

// Custom images from a registry, validated through the real machinery:
// accepted ones are pinned by digest and run; each rejected one says what
// breaks and the fix; calls to an environment that is not ready fail and
// run nowhere else; update follows the tag, revalidate never does.
func TestSandboxCustomImages(t *testing.T) {
	reg := startTestRegistry(t)
	// An archive store, as agenthub serve has by default: a conversation
	// moves to its environment's new image through it, /workspace kept.
	store, serr := archive.Open(t.Context(), (&url.URL{Scheme: "file", Path: filepath.Join(t.TempDir(), "archive")}).String(), archive.Options{})
	if serr != nil {
		t.Fatal(serr)
	}
	t.Cleanup(func() { store.Close() })
	h := startSandboxHub(t, func(o *sandboxes.Options) {
		o.ImageCheck.AllowRegistries = []string{reg.host}
		o.ImageCheck.Insecure = func(host string) bool { return host == reg.host }
		o.Archive = store
	})
	h.require(t, capPull)
	base, minimal := sandboxtest.BaseImage(t), sandboxtest.MinimalImage(t)

	// The images, built here and pushed to the registry.
	var wg sync.WaitGroup
	refs := map[string]string{}
	var mu sync.Mutex
	build := func(name, repoTag, dockerfile string, files map[string]string) {
		wg.Go(func() {
			ref := reg.build(t, repoTag, dockerfile, files)
			mu.Lock()
			refs[name] = ref
			mu.Unlock()
		})
	}
	build("good", "acme/good:v1", "FROM "+base+"\nCOPY acme-tool /usr/local/bin/acme-tool\n"+
		"COPY acme_pkg-1.0.dist-info /usr/lib/python3/dist-packages/acme_pkg-1.0.dist-info\n",
		map[string]string{
			"acme-tool":                       "#!/bin/sh\necho acme\n",
			"acme_pkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: acme-pkg\nVersion: 1.0\n",
		})
	build("nomarker", "acme/nomarker:v1", "FROM "+minimal+"\nLABEL "+sandbox.LabelBaseMarker+"=\n", nil)
	build("nopython", "acme/nopython:v1", "FROM "+minimal+"\n", nil)
	build("rootonly", "acme/rootonly:v1", "FROM "+base+"\nUSER root\nRUN chmod 0700 /usr/bin/jq\nUSER 1000:1000\n", nil)
	build("noshell", "acme/noshell:v1", "FROM "+minimal+"\nUSER root\nRUN [\"/bin/busybox\", \"rm\", \"/bin/sh\"]\nUSER 1000:1000\n", nil)
	wg.Wait()
	if t.Failed() {
		return
	}

	envs := hubv1.NewEnvironmentServiceClient(h.cc)
	create := func(name, image string) {
		t.Helper()
		if _, err := envs.CreateEnvironment(h.ctx("", ""), &hubv1.CreateEnvironmentRequest{Name: name, Image: image, Network: "none"}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	for _, name := range []string{"good", "nomarker", "nopython", "rootonly", "noshell"} {
		create(name, refs[name])
	}
	create("implicit", "acme/sandbox:v1")

	// Bad input changes nothing.
	for _, bad := range []*hubv1.CreateEnvironmentRequest{
		{Name: "good", Image: refs["good"]},                  // taken
		{Name: "builtin", Image: refs["good"]},               // reserved
		{Name: "x y", Image: refs["good"]},                   // name
		{Name: "nonet", Image: refs["good"], Network: "lan"}, // network
		{Name: "noimage"},
	} {
		if _, err := envs.CreateEnvironment(h.ctx("", ""), bad); err == nil {
			t.Errorf("create %+v: no error", bad)
		}
	}

	// Not ready yet: no fallback, the call fails naming the environment.
	_, _, err := h.run(h.ctx("good", "c-1"), "true")
	if st, _ := status.FromError(err); st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), "environment good is ") {
		t.Errorf("call while validating: %v, want FailedPrecondition naming the environment", err)
	}

	const wait = 4 * time.Minute
	good := h.waitEnv("good", wait)
	if good.GetState() != hubv1.EnvironmentState_ENVIRONMENT_STATE_READY {
		t.Fatalf("good: %s (%s)\n%s", good.GetState(), good.GetReason(), reportText(good))
	}
	if !strings.HasPrefix(good.GetPinned(), reg.host+"/acme/good@sha256:") {
		t.Errorf("good pinned %q, want %s/acme/good@sha256:…", good.GetPinned(), reg.host)
	}
	if inv := good.GetInventory(); !contains(inv.GetTools(), "acme-tool") || len(inv.GetTools()) > 5 || !containsPrefix(inv.GetPythonPackages(), "acme") {
		t.Errorf("what good adds: %v / %v; want acme-tool and acme-pkg, not the base's tools\n%s", inv.GetTools(), inv.GetPythonPackages(), reportText(good))
	}
	for _, c := range good.GetReport() {
		if c.GetStatus() == hubv1.CheckStatus_CHECK_STATUS_FAIL {
			t.Errorf("good: failed check %s", c.GetId())
		}
	}
	info, err := agentdv1.NewSystemServiceClient(h.cc).Info(h.ctx("good", "c-1"), &agentdv1.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.GetImage() != good.GetPinned() || info.GetEnvironment() != "good" {
		t.Errorf("sandbox of good runs %q (env %q), want the pin %q", info.GetImage(), info.GetEnvironment(), good.GetPinned())
	}
	if out, _, err := h.run(h.ctx("good", "c-1"), "acme-tool"); err != nil || out != "acme\n" {
		t.Errorf("acme-tool in the sandbox: %q %v", out, err)
	}

	for _, tc := range []struct{ env, check, fix string }{
		{"nomarker", "base.marker", "build FROM " + sandbox.BaseImage},
		{"nopython", "agent.python.run", "python3"},
		{"rootonly", "tools.uid1000", "chmod"},
		{"noshell", "agent.process.shell", ""},
		{"implicit", "reference.syntax", "write docker.io/acme/sandbox:v1"},
	} {
		e := h.waitEnv(tc.env, wait)
		if e.GetState() != hubv1.EnvironmentState_ENVIRONMENT_STATE_REJECTED || e.GetPinned() != "" {
			t.Errorf("%s: %s pinned %q, want rejected and nothing pinned\n%s", tc.env, e.GetState(), e.GetPinned(), reportText(e))
			continue
		}
		c := failed(e, tc.check)
		if c == nil {
			t.Errorf("%s: no failed check %s\n%s", tc.env, tc.check, reportText(e))
			continue
		}
		if c.GetBreaks() == "" || !strings.Contains(c.GetFix(), tc.fix) {
			t.Errorf("%s: check %s breaks %q fix %q; want what breaks and a fix with %q", tc.env, tc.check, c.GetBreaks(), c.GetFix(), tc.fix)
		}
		if tc.env == "nomarker" && c.GetFix() != "build FROM "+sandbox.BaseImage {
			t.Errorf("nomarker fix %q, want exactly one line: build FROM %s", c.GetFix(), sandbox.BaseImage)
		}
		if tc.env == "rootonly" && !strings.Contains(c.GetBreaks(), "/usr/bin/jq") {
			t.Errorf("rootonly: %q does not name /usr/bin/jq", c.GetBreaks())
		}
		_, _, err := h.run(h.ctx(tc.env, "c-1"), "true")
		if st, _ := status.FromError(err); st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), "environment "+tc.env+" is rejected") {
			t.Errorf("call to rejected %s: %v, want FailedPrecondition 'environment %s is rejected'", tc.env, err, tc.env)
		}
	}

	// Each refusal is in the org's activity, with who asked and why.
	st, err := hubv1.NewActivityServiceClient(h.cc).Watch(h.ctx("", ""), &hubv1.WatchRequest{NoFollow: true, Tail: 1000})
	if err != nil {
		t.Fatal(err)
	}
	refused := map[string]string{}
	for {
		r, err := st.Recv()
		if err != nil {
			break
		}
		if rec := r.GetRecord(); rec.GetKind() == "environment.refused" {
			refused[rec.GetObjectId()] = rec.GetActor() + ": " + rec.GetError()
		}
	}
	for _, env := range []string{"good", "nomarker", "nopython", "rootonly", "noshell", "implicit"} {
		if !strings.Contains(refused[env], "environment "+env+" is ") || !strings.HasPrefix(refused[env], "tester: ") {
			t.Errorf("activity of the refused call to %s: %q", env, refused[env])
		}
	}

	// The tag moves: revalidate keeps checking the pinned digest, update
	// follows the tag and pins the new one.
	pin1 := good.GetPinned()
	if _, _, err := h.run(h.ctx("good", "c-1"), "sh", "-c", "mkdir -p /workspace/kept && echo work > /workspace/kept/f && chmod 0751 /workspace/kept"); err != nil {
		t.Fatalf("write the workspace: %v", err)
	}
	reg.build(t, "acme/good:v1", "FROM "+refs["good"]+"\nLABEL build=2\n", nil)
	if _, err := envs.RevalidateEnvironment(h.ctx("", ""), &hubv1.RevalidateEnvironmentRequest{Name: "good"}); err != nil {
		t.Fatal(err)
	}
	// While it revalidates, the pin keeps serving.
	if _, _, err := h.run(h.ctx("good", "c-1"), "true"); err != nil {
		t.Errorf("call while revalidating: %v", err)
	}
	if e := h.waitEnv("good", wait); e.GetPinned() != pin1 || e.GetState() != hubv1.EnvironmentState_ENVIRONMENT_STATE_READY {
		t.Errorf("after revalidate: %s pinned %q, want ready on %q", e.GetState(), e.GetPinned(), pin1)
	}
	if _, err := envs.UpdateEnvironment(h.ctx("", ""), &hubv1.UpdateEnvironmentRequest{Name: "good"}); err != nil {
		t.Fatal(err)
	}
	// One update at a time: the second is told.
	if _, err := envs.UpdateEnvironment(h.ctx("", ""), &hubv1.UpdateEnvironmentRequest{Name: "good"}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("a second update while one runs: %v, want FailedPrecondition", err)
	}
	e := h.waitEnv("good", wait)
	if e.GetState() != hubv1.EnvironmentState_ENVIRONMENT_STATE_READY || e.GetPinned() == pin1 || !strings.HasPrefix(e.GetPinned(), reg.host+"/acme/good@sha256:") {
		t.Errorf("after update: %s pinned %q, want ready on a new digest (was %q)\n%s", e.GetState(), e.GetPinned(), pin1, reportText(e))
	}
	// sandbox ls says what the next call does.
	sbs, err := envs.ListSandboxes(h.ctx("", ""), &hubv1.ListSandboxesRequest{Environment: "good"})
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range sbs.GetSandboxes() {
		if sb.GetConversation() == "c-1" && sb.GetNextStep() != "new image on next call" {
			t.Errorf("sandbox ls of c-1 after the update: next %q, want %q", sb.GetNextStep(), "new image on next call")
		}
	}
	// The conversation moves to the new pin, the same sandbox with its
	// /workspace.
	info, err = agentdv1.NewSystemServiceClient(h.cc).Info(h.ctx("good", "c-1"), &agentdv1.InfoRequest{})
	if err != nil || info.GetImage() != e.GetPinned() {
		t.Errorf("after update the sandbox runs %q (%v), want %q", info.GetImage(), err, e.GetPinned())
	}
	if out, _, err := h.run(h.ctx("good", "c-1"), "sh", "-c", "cat /workspace/kept/f; stat -c %a /workspace/kept"); err != nil || out != "work\n751\n" {
		t.Errorf("the workspace after the move to the new image: %q, %v; want the file and the mode kept", out, err)
	}
	// Default and removal.
	if _, err := envs.SetDefaultEnvironment(h.ctx("", ""), &hubv1.SetDefaultEnvironmentRequest{Name: "good"}); err != nil {
		t.Fatal(err)
	}
	if info, err := agentdv1.NewSystemServiceClient(h.cc).Info(h.ctx("", "c-9"), &agentdv1.InfoRequest{}); err != nil || info.GetEnvironment() != "good" {
		t.Errorf("default environment call ran in %q (%v), want good", info.GetEnvironment(), err)
	}
	if _, err := envs.SetDefaultEnvironment(h.ctx("", ""), &hubv1.SetDefaultEnvironmentRequest{Name: "nosuch"}); status.Code(err) != codes.NotFound {
		t.Errorf("default nosuch: %v, want NotFound", err)
	}
	if _, err := envs.DeleteEnvironment(h.ctx("", ""), &hubv1.DeleteEnvironmentRequest{Name: "good"}); err != nil {
		t.Fatal(err)
	}
	list, _ := envs.ListSandboxes(h.ctx("", ""), &hubv1.ListSandboxesRequest{Environment: "good"})
	if n := len(list.GetSandboxes()); n != 0 {
		t.Errorf("%d sandboxes of a removed environment remain", n)
	}
	_ = context.Background
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func containsPrefix(xs []string, p string) bool {
	for _, x := range xs {
		if strings.HasPrefix(strings.ToLower(x), p) {
			return true
		}
	}
	return false
}
