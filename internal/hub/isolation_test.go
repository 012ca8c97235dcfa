package hub_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/internal/ctl"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxfake"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// On an engine without gVisor's runtimes (the fake lists runc alone),
// gVisor is refused wherever it is asked for, with FAILED_PRECONDITION
// naming make sandbox-runtime, and nothing changes; a call to an
// environment whose isolation the engine lost is refused the same way,
// never run on runc.
func TestIsolationWithoutRuntime(t *testing.T) {
	drv, err := sandboxfake.New(sandboxfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := drv.Close(); err != nil {
			t.Errorf("close the fake driver: %v", err)
		}
	})
	drv.AddImage(sandbox.BaseImage, sandbox.Image{
		Labels: map[string]string{sandbox.LabelBaseMarker: sandbox.BaseContract},
		User:   sandbox.ContainerUser, Architecture: "amd64", OS: "linux", WorkingDir: sandbox.WorkspaceDir,
	})
	h := hubtest.Start(t, hubtest.Options{Sandboxes: sandboxes.Options{
		Driver: drv, AgentdDir: sandboxtest.AgentdBinary(t), SocketDir: t.TempDir(), BuiltinNetwork: "none",
		StartTimeout: 30 * time.Second,
		Limits:       sandbox.Limits{CPUs: 1, MemoryBytes: 512 << 20, Pids: 256, TmpBytes: 64 << 20, HomeBytes: 64 << 20},
	}})
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(h.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := ctl.Main(t.Context(), append([]string{"--hub", h.URL, "--token-file", tf}, args...),
			ctl.IO{In: strings.NewReader(""), Out: &out, Err: &errb})
		return code, out.String(), errb.String()
	}
	cc, err := grpc.NewClient(h.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx := func(env string) context.Context {
		md := metadata.Pairs("authorization", "Bearer "+h.Token)
		if env != "" {
			md.Set("agentd-environment", env, "agentd-conversation", "c-1")
		}
		return metadata.NewOutgoingContext(t.Context(), md)
	}
	envs := hubv1.NewEnvironmentServiceClient(cc)

	for _, tc := range []struct {
		name string
		args []string
	}{
		{"set builtin", []string{"env", "set", "builtin", "--isolation", "gvisor"}},
		{"create", []string{"env", "create", "py", "--image", "registry.test/acme/py:1", "--isolation", "gvisor"}},
		{"create public", []string{"env", "create", "py", "--image", "registry.test/acme/py:1", "--isolation", "gvisor", "--network", "public"}},
	} {
		code, out, errs := run(tc.args...)
		if code == 0 || !strings.Contains(errs, "make sandbox-runtime") || !strings.Contains(errs, "never runs on runc instead") {
			t.Errorf("%s: %v = %d %q %q; want a refusal naming make sandbox-runtime", tc.name, tc.args, code, out, errs)
		}
	}
	_, err = envs.SetEnvironmentIsolation(ctx(""), &hubv1.SetEnvironmentIsolationRequest{Name: "builtin", Isolation: "gvisor"})
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("SetEnvironmentIsolation gvisor: %v, want FailedPrecondition", err)
	}
	// Nothing changed.
	if code, out, _ := run("env", "show", "builtin"); code != 0 || !showsField(out, "isolation", "runc") {
		t.Errorf("env show builtin after the refusals = %d\n%s", code, out)
	}
	if _, err := h.Store.Environment(t.Context(), h.Org.ID, "py"); err == nil {
		t.Errorf("env create --isolation gvisor was refused but stored the environment")
	}
	// Bad input: a usage error, before the hub is asked.
	if code, _, errs := run("env", "set", "builtin", "--isolation", "kata"); code != 2 || !strings.Contains(errs, "want runc or gvisor") {
		t.Errorf("--isolation kata = %d %q, want 2", code, errs)
	}
	if code, _, errs := run("env", "set", "builtin"); code != 2 || !strings.Contains(errs, "--isolation") {
		t.Errorf("env set without a setting = %d %q, want 2", code, errs)
	}
	// runc is always there.
	if code, out, errs := run("env", "set", "builtin", "--isolation", "runc"); code != 0 {
		t.Errorf("env set builtin --isolation runc = %d %q %q", code, out, errs)
	}

	// The engine lost gVisor after the environment chose it: its calls are
	// refused and no container is made.
	if err := h.Store.SetBuiltinIsolation(t.Context(), h.Org.ID, sandbox.IsolationGVisor); err != nil {
		t.Fatal(err)
	}
	_, err = agentdv1.NewSystemServiceClient(cc).Info(ctx("builtin"), &agentdv1.InfoRequest{})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "make sandbox-runtime") {
		t.Errorf("a call to a gvisor builtin without the runtime: %v, want FailedPrecondition naming make sandbox-runtime", err)
	}
	if infos, _ := drv.List(t.Context(), map[string]string{sandbox.LabelManaged: "1"}); len(infos) != 0 {
		t.Errorf("%d containers made for a refused call", len(infos))
	}
}

// showsField reports whether env show's output has the line "LABEL:
// VALUE", however wide the labels' column is.
func showsField(out, label, value string) bool {
	return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(label) + `:\s+` + regexp.QuoteMeta(value) + `$`).MatchString(out)
}
