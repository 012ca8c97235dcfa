package agentd

import (
	"os"
	"runtime"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

func TestInfo(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{Version: "1.2.3-test"})
	got, err := agentdv1.NewSystemServiceClient(ts.Conn).Info(t.Context(), &agentdv1.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != "1.2.3-test" || got.Mode != ModeMachine || got.Os != runtime.GOOS || got.Arch != runtime.GOARCH {
		t.Errorf("Info = %v", got)
	}
	if got.Workspace != ts.Options().Workspace {
		t.Errorf("workspace = %q, want %q", got.Workspace, ts.Options().Workspace)
	}
	if got.Uid != int32(os.Getuid()) || got.Cpus < 1 || got.MemoryBytes <= 0 || got.DiskFreeBytes <= 0 {
		t.Errorf("uid/cpus/memory/disk wrong: %v", got)
	}
}

func TestHealth(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	resp, err := healthpb.NewHealthClient(ts.Conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health = %v, want SERVING", resp.Status)
	}
}

func TestTokenRequired(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{Token: "s3cret"})
	_, err := agentdv1.NewSystemServiceClient(ts.Conn).Info(t.Context(), &agentdv1.InfoRequest{})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("Info without token: %v, want Unauthenticated", err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string]Options{
		"mode":              {Mode: "vm", Workspace: t.TempDir()},
		"missing workspace": {Workspace: "/nonexistent/agentd-test"},
	} {
		if _, err := New(t.Context(), opts); err == nil {
			t.Errorf("%s: New succeeded, want an error", name)
		}
	}
}
