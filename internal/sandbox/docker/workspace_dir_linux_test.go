package docker

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// MountWorkspace shows a stopped container's workspace as a host
// directory, bounded (its ext4 mounted read-only) or not (the volume's
// own directory), refuses a running container, and leaves the device
// free for the next start; a mount a killed hub left is removed by the
// next MountWorkspace and by RecoverWorkspaces.
func TestMountWorkspace(t *testing.T) {
	d := boundedEngine(t)
	image := "agentd-test/driver:mount-" + uniqueName(t)[len("agentd-test-"):]
	testImage(t, d, image, false, 0)
	ctx := t.Context()
	for _, bounded := range []bool{false, true} {
		name := map[bool]string{false: "unbounded", true: "bounded"}[bounded]
		t.Run(name, func(t *testing.T) {
			s := testSpec(t, uniqueName(t), image, "exec sleep 300")
			if bounded {
				s.Limits.WorkspaceBytes = 32 << 20
			}
			id := create(t, d, s)
			if err := d.Start(ctx, id); err != nil {
				t.Fatal(err)
			}
			if out, code := execIn(t, d, id, "echo hi > /workspace/a && mkdir /workspace/d && ln -s /etc/passwd /workspace/d/l && echo ok"); code != 0 || out != "ok" {
				t.Fatalf("write the workspace: %d %q", code, out)
			}
			if _, _, err := d.MountWorkspace(ctx, id); err == nil {
				t.Error("MountWorkspace of a running container: nil error")
			}
			if err := d.Stop(ctx, id, time.Second); err != nil {
				t.Fatal(err)
			}
			for range 2 { // the second time after a release: nothing left over
				dir, release, err := d.MountWorkspace(ctx, id)
				if err != nil {
					t.Fatalf("MountWorkspace: %v", err)
				}
				if b, err := os.ReadFile(filepath.Join(dir, "a")); err != nil || string(b) != "hi\n" {
					t.Errorf("a: %q %v", b, err)
				}
				if l, err := os.Readlink(filepath.Join(dir, "d", "l")); err != nil || l != "/etc/passwd" {
					t.Errorf("d/l: %q %v", l, err)
				}
				if err := release(); err != nil {
					t.Fatalf("release: %v", err)
				}
			}
			// A hub killed while it read: the mount stays behind.
			if _, _, err := d.MountWorkspace(ctx, id); err != nil {
				t.Fatal(err)
			}
			if bounded {
				if _, _, err := d.MountWorkspace(ctx, id); err != nil {
					t.Fatalf("MountWorkspace over a left mount: %v", err)
				}
				if err := d.RecoverWorkspaces(ctx); err != nil {
					t.Fatalf("RecoverWorkspaces: %v", err)
				}
			}
			if err := d.Start(ctx, id); err != nil {
				t.Fatalf("start after the workspace was read: %v", err)
			}
			if out, code := execIn(t, d, id, "cat /workspace/a"); code != 0 || out != "hi" {
				t.Errorf("after the start: %d %q", code, out)
			}
		})
	}
}
