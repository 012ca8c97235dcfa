//go:build linux

package hub_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/docker"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxfake"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// The main sandbox path with the fake driver: the static agentd runs as a
// host process (Linux only: it is built for Linux), no Docker needed.
func TestSandboxPathFake(t *testing.T) {
	drv, err := sandboxfake.New(sandboxfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Registered before the hub starts, so it runs after the hub stopped:
	// it kills the sandboxes' agentd processes and removes their files.
	t.Cleanup(func() {
		if err := drv.Close(); err != nil {
			t.Errorf("close the fake driver: %v", err)
		}
	})
	drv.AddImage(sandbox.BaseImage, sandbox.Image{
		Labels: map[string]string{sandbox.LabelBaseMarker: sandbox.BaseContract},
		User:   sandbox.ContainerUser, Architecture: "amd64", OS: "linux", WorkingDir: sandbox.WorkspaceDir,
	})
	sandboxPath(t, drv)
}

// The same path on the Docker engine, for comparison (go test -v -run
// 'TestSandboxPath(Fake|Docker)').
func TestSandboxPathDocker(t *testing.T) {
	sandboxtest.BaseImage(t) // skips without an engine
	drv, err := docker.New(docker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	sandboxPath(t, drv)
}

// sandboxPath: a conversation's first call makes its sandbox, exec runs in
// it (in its workspace), a second call of the conversation reaches the same
// sandbox, and sandbox rm removes its container and workspace volume.
func sandboxPath(t *testing.T, drv sandbox.Driver) {
	h := hubtest.Start(t, hubtest.Options{Sandboxes: sandboxes.Options{
		Driver:         drv,
		AgentdDir:      sandboxtest.AgentdBinary(t),
		SocketDir:      t.TempDir(),
		BuiltinNetwork: "none",
		StartTimeout:   60 * time.Second,
		Limits:         sandbox.Limits{CPUs: 1, MemoryBytes: 512 << 20, Pids: 256, TmpBytes: 64 << 20, HomeBytes: 64 << 20},
	}})
	// Whatever the test leaves of its own goes once the hub has stopped
	// (this runs before hubtest's own stop): removed by id.
	t.Cleanup(func() {
		h.Stop()
		ctx := context.Background()
		sbs, _ := h.Store.ListSandboxes(ctx, "")
		for _, sb := range sbs {
			infos, _ := drv.List(ctx, map[string]string{sandbox.LabelManaged: "1", sandbox.LabelID: sb.ID})
			for _, in := range infos {
				_ = drv.Remove(ctx, in.ID)
			}
		}
	})
	cc, err := grpc.NewClient(h.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	call := func(env, conv string) context.Context {
		md := metadata.Pairs("authorization", "Bearer "+h.Token)
		if env != "" {
			md.Set("agentd-environment", env, "agentd-conversation", conv)
		}
		return metadata.NewOutgoingContext(t.Context(), md)
	}
	run := func(ctx context.Context, argv ...string) (string, int32, error) {
		st, err := agentdv1.NewProcessServiceClient(cc).Start(ctx, &agentdv1.StartRequest{Argv: argv})
		if err != nil {
			return "", 0, err
		}
		var out strings.Builder
		for {
			r, err := st.Recv()
			if errors.Is(err, io.EOF) {
				return out.String(), 0, errors.New("no exit event")
			}
			if err != nil {
				return out.String(), 0, err
			}
			out.Write(r.GetEvent().GetOutput().GetData())
			if x := r.GetEvent().GetExited(); x != nil {
				return out.String(), x.GetExitCode(), nil
			}
		}
	}

	began := time.Now()
	info, err := agentdv1.NewSystemServiceClient(cc).Info(call("builtin", "c-1"), &agentdv1.InfoRequest{})
	if err != nil {
		t.Fatalf("first call: %v", err)
	}
	t.Logf("first call, the sandbox made and its agentd connected: %v", time.Since(began))
	sbID := info.GetTunnel().GetMachineId()
	if info.GetMode() != "sandbox" || info.GetEnvironment() != "builtin" || !strings.HasPrefix(sbID, "sb-") {
		t.Fatalf("info: mode %q environment %q machine %q; want sandbox, builtin, sb-…", info.GetMode(), info.GetEnvironment(), sbID)
	}
	if out, code, err := run(call("builtin", "c-1"), "sh", "-c", "echo hi > f && cat f"); err != nil || code != 0 || out != "hi\n" {
		t.Errorf("exec: %q exit %d %v; want hi", out, code, err)
	}
	// The same conversation: the same sandbox, its workspace kept.
	info2, err := agentdv1.NewSystemServiceClient(cc).Info(call("builtin", "c-1"), &agentdv1.InfoRequest{})
	if err != nil || info2.GetTunnel().GetMachineId() != sbID {
		t.Errorf("second call: machine %q %v; want %s", info2.GetTunnel().GetMachineId(), err, sbID)
	}
	if out, code, err := run(call("builtin", "c-1"), "cat", "f"); err != nil || code != 0 || out != "hi\n" {
		t.Errorf("exec in the second call: %q exit %d %v; want hi", out, code, err)
	}

	envs := hubv1.NewEnvironmentServiceClient(cc)
	admin := call("", "")
	list, err := envs.ListSandboxes(admin, &hubv1.ListSandboxesRequest{})
	if err != nil || len(list.GetSandboxes()) != 1 {
		t.Errorf("sandbox ls: %v %v; want one", list.GetSandboxes(), err)
	}
	sb, err := h.Store.Sandbox(t.Context(), sbID)
	if err != nil {
		t.Fatal(err)
	}
	if in, err := drv.Inspect(t.Context(), sb.ContainerID); err != nil || in.State != sandbox.StateRunning {
		t.Errorf("the sandbox's container: %+v %v; want running", in, err)
	}
	if _, err := envs.RemoveSandbox(admin, &hubv1.RemoveSandboxRequest{Id: sbID}); err != nil {
		t.Fatalf("sandbox rm: %v", err)
	}
	if _, err := drv.Inspect(t.Context(), sb.ContainerID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("container after rm: %v, want ErrNotFound", err)
	}
	if vols, err := drv.Volumes(t.Context(), map[string]string{sandbox.LabelID: sbID}); err != nil || len(vols) != 0 {
		t.Errorf("volumes after rm: %v %v, want none", vols, err)
	}
	if _, err := envs.RemoveSandbox(admin, &hubv1.RemoveSandboxRequest{Id: sbID}); status.Code(err) != codes.NotFound {
		t.Errorf("rm twice: %v, want NotFound", err)
	}
	t.Logf("the whole path: %v", time.Since(began))
}
