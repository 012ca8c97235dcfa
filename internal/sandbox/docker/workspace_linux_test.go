package docker

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"go.uber.org/zap/zaptest"
	"golang.org/x/sys/unix"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/loopfs"
)

// boundedEngine is a driver on the local engine whose workspaces are
// bounded, in a directory of the test's.
func boundedEngine(t *testing.T) *Driver {
	t.Helper()
	engine(t) // skips without an engine
	if os.Geteuid() != 0 {
		t.Skip("bounded workspaces need root (loop devices)")
	}
	d, err := New(Options{Logger: zaptest.NewLogger(t), WorkspaceDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// allocated is how much of the host's disk a file takes.
func allocated(t *testing.T, path string) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// A sandbox that writes past its workspace's size gets ENOSPC, the host's
// disk holds no more than the size, and removing the sandbox frees it all:
// the volume, the loop device, the files. The image's /workspace content
// is still copied in, and the sandbox user owns the root.
func TestWorkspaceBounded(t *testing.T) {
	d := boundedEngine(t)
	image := "agentd-test/driver:quota-" + uniqueName(t)[len("agentd-test-"):]
	testImage(t, d, image, true, 0)
	const size = 32 << 20

	s := testSpec(t, uniqueName(t), image, "exec sleep 300")
	s.Limits.WorkspaceBytes = size
	id := create(t, d, s)
	vol := volumeName(s.Name)
	img, dev := d.workspaceFiles(vol)
	loop := loopfs.LoopOf(img, dev)
	if loop == "" {
		t.Fatalf("no loop device holds %s through %s", img, dev)
	}
	if err := d.Start(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	out, code := execIn(t, d, id, "cat /workspace/seed && stat -c %u:%g /workspace && dd if=/dev/zero of=/workspace/big bs=1M count=64")
	if code == 0 || !strings.Contains(out, "No space left on device") || !strings.HasPrefix(out, "seed\n1000:1000\n") {
		t.Errorf("writing 64 MiB into a 32 MiB workspace: exit %d, %q; want the seed, 1000:1000, then No space left on device", code, out)
	}
	if got := allocated(t, img); got > size {
		t.Errorf("the workspace takes %d bytes of the host's disk, more than its %d", got, size)
	}
	// What was written stays; the sandbox can free space and write again.
	if out, code := execIn(t, d, id, "rm /workspace/big && echo again > /workspace/f && cat /workspace/f"); code != 0 || out != "again" {
		t.Errorf("after freeing: exit %d %q", code, out)
	}

	if err := d.Remove(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{img, dev} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after Remove: %v; want it gone", p, err)
		}
	}
	if b := loopfs.Backing(loop); b == img {
		t.Errorf("%s still holds %s after Remove", loop, img)
	}
	if _, err := d.cli.VolumeInspect(t.Context(), vol, client.VolumeInspectOptions{}); err == nil {
		t.Errorf("volume %s is still there", vol)
	}
}

// After a crash, RecoverWorkspaces releases the workspaces whose volume is
// gone, and gives a workspace whose loop device went (the host restarted)
// a device again, with its content.
func TestWorkspaceRecover(t *testing.T) {
	d := boundedEngine(t)
	image := "agentd-test/driver:quota-" + uniqueName(t)[len("agentd-test-"):]
	testImage(t, d, image, false, 0)
	ctx := t.Context()

	// Kept: its loop device is detached behind the hub's back.
	kept := testSpec(t, uniqueName(t), image, "exec sleep 300")
	kept.Limits.WorkspaceBytes = 32 << 20
	keptID := create(t, d, kept)
	if err := d.Start(ctx, keptID); err != nil {
		t.Fatal(err)
	}
	if out, code := execIn(t, d, keptID, "echo kept > /workspace/f"); code != 0 {
		t.Fatalf("write: %d %s", code, out)
	}
	if err := d.Stop(ctx, keptID, time.Second); err != nil {
		t.Fatal(err)
	}
	keptImg, keptDev := d.workspaceFiles(volumeName(kept.Name))
	if err := loopfs.Detach(loopfs.LoopOf(keptImg, keptDev)); err != nil {
		t.Fatal(err)
	}

	// Lost: its volume was removed and the hub died before the release.
	lost := testSpec(t, uniqueName(t), image, "exec sleep 300")
	lost.Limits.WorkspaceBytes = 32 << 20
	lostID := create(t, d, lost)
	lostVol := volumeName(lost.Name)
	lostImg, lostDev := d.workspaceFiles(lostVol)
	lostLoop := loopfs.LoopOf(lostImg, lostDev)
	if err := d.removeContainer(ctx, lostID); err != nil {
		t.Fatal(err)
	}
	if _, err := d.cli.VolumeRemove(ctx, lostVol, client.VolumeRemoveOptions{}); err != nil {
		t.Fatal(err)
	}

	if err := d.RecoverWorkspaces(ctx); err != nil {
		t.Fatalf("RecoverWorkspaces: %v", err)
	}
	for _, p := range []string{lostImg, lostDev} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s of a removed volume after RecoverWorkspaces: %v; want it gone", p, err)
		}
	}
	if loopfs.Backing(lostLoop) == lostImg {
		t.Errorf("%s still holds %s", lostLoop, lostImg)
	}
	if loopfs.LoopOf(keptImg, keptDev) == "" {
		t.Fatalf("the kept workspace has no loop device after RecoverWorkspaces")
	}
	if err := d.Start(ctx, keptID); err != nil {
		t.Fatal(err)
	}
	if out, code := execIn(t, d, keptID, "cat /workspace/f"); code != 0 || out != "kept" {
		t.Errorf("the kept workspace after RecoverWorkspaces: %d %q; want kept", code, out)
	}
}

// Without a workspace directory the driver cannot bound a workspace: it
// says so, and leaves nothing behind.
func TestWorkspaceBoundRefused(t *testing.T) {
	d := engine(t)
	s := testSpec(t, uniqueName(t), "agentd-test/minimal:1", "exec sleep 300")
	s.Limits.WorkspaceBytes = 32 << 20
	id, err := d.Create(t.Context(), s)
	if err == nil {
		_ = d.Remove(cleanupCtx(t), id)
	}
	if err == nil || !strings.Contains(err.Error(), "WorkspaceDir") {
		t.Errorf("Create with a workspace size and no WorkspaceDir: %v; want an error naming WorkspaceDir", err)
	}
	if _, err := d.cli.VolumeInspect(t.Context(), volumeName(s.Name), client.VolumeInspectOptions{}); err == nil {
		t.Errorf("volume %s left behind", volumeName(s.Name))
	}
}

// An empty workspace of the default size takes little of the host's disk
// (the image is sparse, its journal small), and a volume's removal
// releases it.
func TestWorkspaceSparse(t *testing.T) {
	d := boundedEngine(t)
	vol := volumeName(uniqueName(t))
	if err := d.createBoundedVolume(t.Context(), vol, map[string]string{sandbox.LabelManaged: "1"}, 10<<30); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.removeVolume(cleanupCtx(t), vol) })
	img, dev := d.workspaceFiles(vol)
	if got := allocated(t, img); got > 32<<20 {
		t.Errorf("an empty 10 GiB workspace takes %d bytes of the host's disk; want at most 32 MiB", got)
	}
	loop := loopfs.LoopOf(img, dev)
	if err := d.RemoveVolume(t.Context(), vol); err != nil {
		t.Fatal(err)
	}
	if fileExists(img) || fileExists(dev) || (loop != "" && loopfs.Backing(loop) == img) {
		t.Errorf("after RemoveVolume: image %v, link %v, %s holds it: %v", fileExists(img), fileExists(dev), loop, loopfs.Backing(loop) == img)
	}
}

// With no loop device to be had, Create says so (ErrNoLoopDevice, which is
// sandbox.ErrExhausted) and leaves nothing behind: no volume, no files.
func TestWorkspaceNoLoopDevice(t *testing.T) {
	d := boundedEngine(t)
	d.loopControl = t.TempDir() + "/no-loop-control"
	s := testSpec(t, uniqueName(t), "agentd-test/minimal:1", "exec sleep 300")
	s.Limits.WorkspaceBytes = 32 << 20
	id, err := d.Create(t.Context(), s)
	if err == nil {
		_ = d.Remove(cleanupCtx(t), id)
	}
	if !errors.Is(err, ErrNoLoopDevice) || !errors.Is(err, sandbox.ErrExhausted) {
		t.Errorf("Create without loop devices: %v; want ErrNoLoopDevice (sandbox.ErrExhausted)", err)
	}
	if _, err := d.cli.VolumeInspect(t.Context(), volumeName(s.Name), client.VolumeInspectOptions{}); err == nil {
		t.Errorf("volume %s left behind", volumeName(s.Name))
	}
	if left, _ := os.ReadDir(d.wsDir); len(left) != 0 {
		t.Errorf("%d files left in the workspace dir", len(left))
	}
}

// Two bounded workspaces of one size are copied as file system images:
// from a paused source (mounted: frozen for the copy, writable again
// after) and from a stopped one, owners, modes and times kept, and a write
// into the copy does not reach the source. A smaller workspace is copied
// file by file and refused when the files do not fit.
func TestCopyWorkspaceBounded(t *testing.T) {
	d := boundedEngine(t)
	image := "agentd-test/forkcopy:" + uniqueName(t)
	testImage(t, d, image, false, 0)
	exited := func(id string) sandbox.Info {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); ; {
			in, err := d.Inspect(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if in.State == sandbox.StateExited || time.Now().After(deadline) {
				return in
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	src := testSpec(t, uniqueName(t), image, `head -c 20000000 /dev/zero > /workspace/big && echo ok > /workspace/small && `+
		`chmod 640 /workspace/small && TZ=UTC touch -d "2020-01-02 03:04:05" /workspace/small && exec sleep 300`)
	src.Limits.WorkspaceBytes = 64 << 20
	sid := create(t, d, src)
	if err := d.Start(t.Context(), sid); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; {
		out, _ := exec.Command("docker", "exec", sid, "stat", "-c", "%Y", "/workspace/small").CombinedOutput()
		if string(out) == "1577934245\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the source did not write its files: %q", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	check := `[ "$(stat -c %s /workspace/big)" = 20000000 ] && [ "$(cat /workspace/small)" = ok ] && ` +
		`[ "$(stat -c %a:%u:%g:%Y /workspace/small)" = 640:1000:1000:1577934245 ] && [ ! -e /workspace/fork-only ] && touch /workspace/fork-only`
	copyTo := func(name string) {
		t.Helper()
		dst := testSpec(t, uniqueName(t), image, check)
		dst.Limits.WorkspaceBytes = 64 << 20
		did := create(t, d, dst)
		n := d.imageCopies.Load()
		if err := d.CopyWorkspace(t.Context(), sid, did); err != nil {
			t.Fatalf("%s: CopyWorkspace between bounded workspaces: %v", name, err)
		}
		if d.imageCopies.Load() != n+1 {
			t.Errorf("%s: not copied as an image", name)
		}
		if err := d.Start(t.Context(), did); err != nil {
			t.Fatal(err)
		}
		if in := exited(did); in.ExitCode != 0 {
			t.Errorf("%s: the copy's check exited %d", name, in.ExitCode)
		}
	}
	if err := d.Pause(t.Context(), sid); err != nil {
		t.Fatal(err)
	}
	copyTo("from a paused source")
	copyTo("a second copy after the first wrote")
	if err := d.Unpause(t.Context(), sid); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("docker", "exec", sid, "touch", "/workspace/after").CombinedOutput(); err != nil {
		t.Fatalf("the source's workspace after its copy: %v %s (still frozen?)", err, out)
	}
	if err := d.Stop(t.Context(), sid, time.Second); err != nil {
		t.Fatal(err)
	}
	copyTo("from a stopped source")

	small := testSpec(t, uniqueName(t), image, "true")
	small.Limits.WorkspaceBytes = 16 << 20
	if err := d.CopyWorkspace(t.Context(), sid, create(t, d, small)); err == nil {
		t.Errorf("CopyWorkspace of 20 MB into a 16 MiB workspace: nil, want an error")
	} else {
		t.Logf("into a smaller workspace: %v", err)
	}
}
