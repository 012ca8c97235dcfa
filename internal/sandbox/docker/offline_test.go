package docker

// Tests that need no engine.

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

func TestUserIDs(t *testing.T) {
	if got := fmt.Sprintf("%d:%d", uid, gid); got != sandbox.ContainerUser {
		t.Errorf("uid:gid %s, sandbox.ContainerUser %s", got, sandbox.ContainerUser)
	}
}

// TestUnavailable needs no engine: every call on a driver at a socket that
// does not exist fails with ErrUnavailable, naming the socket.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	const host = "unix:///nonexistent.sock"
	d, err := New(Options{Host: host})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	ctx := t.Context()
	for name, call := range map[string]func() error{
		"Ping":    func() error { return d.Ping(ctx) },
		"Pull":    func() error { _, err := d.Pull(ctx, "example.com/x:1"); return err },
		"Image":   func() error { _, err := d.Image(ctx, "x:1"); return err },
		"Create":  func() error { _, err := d.Create(ctx, validSpec()); return err },
		"Start":   func() error { return d.Start(ctx, "x") },
		"Stop":    func() error { return d.Stop(ctx, "x", time.Second) },
		"Remove":  func() error { return d.Remove(ctx, "x") },
		"Inspect": func() error { _, err := d.Inspect(ctx, "x"); return err },
		"List":    func() error { _, err := d.List(ctx, map[string]string{"a": "b"}); return err },
	} {
		err := call()
		if !errors.Is(err, sandbox.ErrUnavailable) {
			t.Errorf("%s: %v, want ErrUnavailable", name, err)
			continue
		}
		if want := "docker engine at " + host + " is not reachable: "; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %q, want it to start %q", name, err, want)
		}
	}
}

func validSpec() sandbox.Spec {
	return sandbox.Spec{
		Name:    "sb-1",
		Image:   "sha256:0123",
		Cmd:     []string{"/opt/agentd/agentd"},
		Network: "none",
		Limits:  sandbox.Limits{CPUs: 1, MemoryBytes: 1 << 30, Pids: 256, TmpBytes: 1 << 28, HomeBytes: 1 << 28},
	}
}

// TestValidate: a spec that would leave a limit or a choice to the engine's
// weaker defaults is refused before the engine is asked anything.
func TestValidate(t *testing.T) {
	t.Parallel()
	d, err := New(Options{Host: "unix:///nonexistent.sock"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	for _, tc := range []struct {
		name   string
		modify func(*sandbox.Spec)
	}{
		{"no name", func(s *sandbox.Spec) { s.Name = "" }},
		{"bad name", func(s *sandbox.Spec) { s.Name = "sb/1" }},
		{"no image", func(s *sandbox.Spec) { s.Image = "" }},
		{"no command", func(s *sandbox.Spec) { s.Cmd = nil }},
		{"no network", func(s *sandbox.Spec) { s.Network = "" }},
		{"relative agentd dir", func(s *sandbox.Spec) { s.AgentdHostDir = "agentd" }},
		{"relative hub dir", func(s *sandbox.Spec) { s.HubSocketHostDir = "run" }},
		{"no cpus", func(s *sandbox.Spec) { s.Limits.CPUs = 0 }},
		{"no memory", func(s *sandbox.Spec) { s.Limits.MemoryBytes = 0 }},
		{"no pids", func(s *sandbox.Spec) { s.Limits.Pids = -1 }},
		{"no tmp size", func(s *sandbox.Spec) { s.Limits.TmpBytes = 0 }},
		{"no home size", func(s *sandbox.Spec) { s.Limits.HomeBytes = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := validSpec()
			tc.modify(&s)
			_, err := d.Create(t.Context(), s)
			if err == nil || errors.Is(err, sandbox.ErrUnavailable) {
				t.Errorf("Create: %v, want a refusal before the engine is asked", err)
			}
		})
	}
}

func TestHubLabelPrefix(t *testing.T) {
	for _, l := range []string{sandbox.LabelManaged, sandbox.LabelHub, sandbox.LabelID, sandbox.LabelOrg,
		sandbox.LabelEnv, sandbox.LabelConv, sandbox.LabelWarm} {
		if !strings.HasPrefix(l, hubLabelPrefix) {
			t.Errorf("hub label %s does not start with %s: an image could set it on a sandbox", l, hubLabelPrefix)
		}
	}
	got := labels(map[string]string{sandbox.LabelID: "sb-1"},
		map[string]string{sandbox.LabelID: "x", sandbox.LabelWarm: "1", "org.example": "y"})
	want := map[string]string{sandbox.LabelID: "sb-1", sandbox.LabelWarm: ""}
	if !maps.Equal(got, want) {
		t.Errorf("labels: %v, want %v", got, want)
	}
}
