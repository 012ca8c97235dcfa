// Package sdktest runs the Python SDK's tests (sdk/python/tests) with
// Debian's /usr/bin/python3 against real processes: agenthub serve (with
// builtin sandboxes on the local Docker engine), a paired agentd run, and
// a control endpoint the Python tests call to SIGKILL the hub mid-stream
// and start it again on the same address and database.
package sdktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/testbin"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// python is Debian's interpreter, named explicitly: a python3 earlier on
// PATH (pyenv) may lack Debian's grpcio and protobuf.
const python = "/usr/bin/python3"

var binDir string

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if !pythonHasGRPC() {
		// The tests say why they skip.
		return m.Run()
	}
	dir, err := testbin.Temp("agenthub", "agentd", "agentctl") // agentctl: the demo runs it
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	return m.Run()
}

// pythonHasGRPC reports whether Debian's python3 can import grpc and
// google.protobuf (python3-grpcio, python3-protobuf).
func pythonHasGRPC() bool {
	return exec.Command(python, "-c", "import grpc, google.protobuf").Run() == nil
}

func needPython(t *testing.T) {
	t.Helper()
	if !pythonHasGRPC() {
		t.Skipf("%s cannot import grpc and google.protobuf: apt-get install python3-grpcio python3-protobuf (CI installs them)", python)
	}
}

// sdkDir is sdk/python, the directory above this package.
func sdkDir(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller")
	}
	return filepath.Dir(filepath.Dir(file))
}

// TestPythonSDK runs sdk/python/tests with python3 -m unittest against a
// real hub, a real paired agentd and (when the Docker engine has the
// sandbox base image) a real builtin sandbox.
func TestPythonSDK(t *testing.T) {
	needPython(t)
	h := startHub(t)
	machine := h.pairMachine(t)
	control := h.serveControl(t)

	env := append(os.Environ(),
		"PYTHONPATH="+sdkDir(t),
		"PYTHONDONTWRITEBYTECODE=1",
		"AGENTD_TEST_HUB="+h.url(),
		"AGENTD_TEST_TOKEN="+h.token,
		"AGENTD_TEST_MACHINE="+machine,
		"AGENTD_TEST_CONTROL="+control,
		"AGENTD_TOKEN=", // the tests pass their token explicitly
	)
	if h.sandboxes {
		env = append(env, "AGENTD_TEST_SANDBOX=1")
	}
	args := []string{"-m", "unittest", "discover", "-v", "-s", filepath.Join(sdkDir(t), "tests"), "-t", sdkDir(t)}
	if k := os.Getenv("AGENTD_TEST_PYTHON_K"); k != "" {
		args = append(args, "-k", k) // only the tests matching k (python3 -m unittest -k)
	}
	cmd := exec.Command(python, args...)
	cmd.Env = env
	cmd.Dir = sdkDir(t)
	out, err := cmd.CombinedOutput()
	t.Logf("python3 -m unittest:\n%s", out)
	if err != nil {
		t.Fatalf("the Python SDK's tests failed: %v", err)
	}
	if !h.sandboxes {
		t.Log("sandbox tests skipped: the Docker engine lacks " + sandbox.BaseImage + " (make sandbox-base)")
	}
}

// TestPythonSDKTypes checks the package with Debian's mypy, strict as
// sdk/python/pyproject.toml sets it.
func TestPythonSDKTypes(t *testing.T) {
	needPython(t)
	if exec.Command(python, "-m", "mypy", "--version").Run() != nil {
		t.Skipf("%s has no mypy: apt-get install mypy", python)
	}
	cmd := exec.Command(python, "-m", "mypy", "--cache-dir", t.TempDir(), "agentd", "tests", "_build")
	cmd.Dir = sdkDir(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mypy: %v\n%s", err, out)
	}
}

// TestPythonSDKInstall installs the package with a plain pip install and
// no index (its build backend needs nothing downloaded) into a venv that
// sees Debian's grpcio and protobuf, and imports it there.
func TestPythonSDKInstall(t *testing.T) {
	needPython(t)
	if exec.Command(python, "-c", "import venv, ensurepip").Run() != nil {
		t.Skipf("%s lacks venv: apt-get install python3-venv", python)
	}
	venv := filepath.Join(t.TempDir(), "venv")
	if out, err := exec.Command(python, "-m", "venv", "--system-site-packages", venv).CombinedOutput(); err != nil {
		t.Fatalf("venv: %v\n%s", err, out)
	}
	// A copy, so that nothing pip does can touch the tree.
	src := filepath.Join(t.TempDir(), "python")
	if out, err := exec.Command("cp", "-r", sdkDir(t), src).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	pip := exec.Command(filepath.Join(venv, "bin", "pip"), "install", "--no-index", src)
	pip.Env = append(os.Environ(), "PIP_DISABLE_PIP_VERSION_CHECK=1")
	if out, err := pip.CombinedOutput(); err != nil {
		t.Fatalf("pip install: %v\n%s", err, out)
	}
	check := exec.Command(filepath.Join(venv, "bin", "python"), "-c",
		"import agentd, agentd.aio, agentd.v1.process_pb2_grpc, os; print(os.path.dirname(agentd.__file__))")
	check.Dir = t.TempDir() // not sdk/python: the installed copy must be found
	out, err := check.Output()
	if err != nil {
		t.Fatalf("import agentd from the venv: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); !strings.HasPrefix(got, venv) {
		t.Errorf("agentd imported from %s, want the venv %s", got, venv)
	}
}

// hubProc is agenthub serve, restartable on the same address.
type hubProc struct {
	addr      string
	token     string
	args      []string
	dir       string
	sandboxes bool

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	log  *lockedBuffer
}

func (h *hubProc) url() string { return "http://" + h.addr }

func startHub(t *testing.T) *hubProc {
	t.Helper()
	dir := t.TempDir()
	db := filepath.Join(dir, "hub.db")
	initCmd := exec.Command(filepath.Join(binDir, "agenthub"), "init", "--db", db)
	var stderr bytes.Buffer
	initCmd.Stderr = &stderr
	out, err := initCmd.Output()
	if err != nil {
		t.Fatalf("agenthub init: %v\n%s", err, stderr.String())
	}
	h := &hubProc{token: strings.TrimSpace(string(out)), dir: dir, log: &lockedBuffer{}}
	h.sandboxes = exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", sandbox.BaseImage).Run() == nil
	mode := "off"
	if h.sandboxes {
		mode = "on"
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.addr = l.Addr().String()
	l.Close()
	h.args = []string{"serve", "--listen", h.addr, "--db", db, "--sandboxes", mode,
		"--sandbox-dir", filepath.Join(dir, "sandboxes"), "--warm-builtin", "0", "--agent-releases", "off", "--log-level", "warn",
		// The suite makes a sandbox per test case and conversation, with one
		// token: more than the default caps allow.
		"--org-max-sandboxes", "0", "--token-max-sandboxes", "0"}
	if err := h.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if h.sandboxes {
			h.removeSandboxes(t)
		}
		h.stop(syscall.SIGTERM)
		if t.Failed() {
			t.Logf("agenthub's log:\n%s", h.log.String())
		}
	})
	return h
}

// start runs agenthub serve and waits until /healthz answers.
func (h *hubProc) start() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	cmd := exec.Command(filepath.Join(binDir, "agenthub"), h.args...)
	cmd.Stdout, cmd.Stderr = h.log, h.log
	cmd.Env = append(os.Environ(), "HOME="+h.dir)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("agenthub serve: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	h.cmd, h.done = cmd, done
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(h.url() + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("agenthub serve exited at start:\n%s", h.log.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("agenthub serve: /healthz did not answer within 30s: %v", err)
		}
	}
}

// stop sends sig and waits for the hub to exit (SIGKILL after 10 s).
func (h *hubProc) stop(sig syscall.Signal) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cmd == nil {
		return
	}
	_ = h.cmd.Process.Signal(sig)
	select {
	case <-h.done:
	case <-time.After(10 * time.Second):
		_ = h.cmd.Process.Kill()
		<-h.done
	}
	h.cmd = nil
}

// removeSandboxes removes the sandboxes this hub made: through the hub
// (RemoveSandbox), and then any container still carrying one of their
// ids, by container id. Call it while the hub runs.
func (h *hubProc) removeSandboxes(t *testing.T) {
	cc, err := grpc.NewClient(h.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Error(err)
		return
	}
	defer cc.Close()
	envs := hubv1.NewEnvironmentServiceClient(cc)
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+h.token), time.Minute)
	defer cancel()
	resp, err := envs.ListSandboxes(ctx, &hubv1.ListSandboxesRequest{})
	if err != nil {
		t.Errorf("ListSandboxes: %v", err)
		return
	}
	for _, sb := range resp.GetSandboxes() {
		if _, err := envs.RemoveSandbox(ctx, &hubv1.RemoveSandboxRequest{Id: sb.GetId()}); err != nil {
			t.Errorf("RemoveSandbox %s: %v", sb.GetId(), err)
		}
		out, err := exec.Command("docker", "ps", "-aq", "--filter", "label="+sandbox.LabelID+"="+sb.GetId()).Output()
		if err != nil {
			continue
		}
		for _, id := range strings.Fields(string(out)) {
			if out, err := exec.Command("docker", "rm", "-f", "-v", id).CombinedOutput(); err != nil {
				t.Errorf("docker rm %s (sandbox %s): %v\n%s", id, sb.GetId(), err, out)
			}
		}
	}
}

// admin returns the hub's admin service and a context with the token.
func (h *hubProc) admin(t *testing.T) (hubv1.AdminServiceClient, context.Context) {
	cc, err := grpc.NewClient(h.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return hubv1.NewAdminServiceClient(cc), metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+h.token)
}

// pairMachine pairs a new agentd with the hub, runs it, waits until the
// hub shows it online and returns its id.
func (h *hubProc) pairMachine(t *testing.T) string {
	t.Helper()
	admin, ctx := h.admin(t)
	code, err := admin.CreatePairingCode(ctx, &hubv1.CreatePairingCodeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "HOME="+dir, "SHELL=/bin/sh",
		"AGENTD_CONFIG_DIR="+filepath.Join(dir, "config"), "AGENTD_STATE_DIR="+filepath.Join(dir, "state"))
	pair := exec.Command(filepath.Join(binDir, "agentd"), "pair", "--hub", h.url(), "--code", code.GetCode())
	pair.Env = env
	var stderr bytes.Buffer
	pair.Stderr = &stderr
	out, err := pair.Output()
	if err != nil {
		t.Fatalf("agentd pair: %v\n%s", err, stderr.String())
	}
	id := strings.TrimSpace(string(out))

	log := &lockedBuffer{}
	run := exec.Command(filepath.Join(binDir, "agentd"), "run", "--workspace", ws)
	run.Env = env
	run.Stdout, run.Stderr = log, log
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = run.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = run.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = run.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("agentd run's log:\n%s", log.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := admin.ListMachines(ctx, &hubv1.ListMachinesRequest{})
		if err != nil {
			t.Fatalf("ListMachines: %v", err)
		}
		for _, m := range resp.GetMachines() {
			if m.GetId() == id && m.GetStatus() == hubv1.MachineStatus_MACHINE_STATUS_ONLINE {
				return id
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("machine %s not online within 30s; agentd's log:\n%s", id, log.String())
		}
		select {
		case <-done:
			t.Fatalf("agentd run exited:\n%s", log.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// serveControl serves POST /kill-hub on loopback: the hub is killed with
// SIGKILL (mid-stream, as the Go chaos tests do), started again on the
// same address and database, and the answer comes once it is healthy.
// It returns the endpoint's URL.
func (h *hubProc) serveControl(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /kill-hub", func(w http.ResponseWriter, _ *http.Request) {
		h.stop(syscall.SIGKILL)
		if err := h.start(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "restarted")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("control server: %v", err)
		}
	})
	return "http://" + l.Addr().String()
}

// lockedBuffer collects a process's output; safe for concurrent use.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
