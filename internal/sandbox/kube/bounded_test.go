package kube

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/loopfs"
)

// boundedSpec is a spec of a bounded workspace (32 MiB) running script.
func boundedSpec(t *testing.T, d *Driver, name, script string) sandbox.Spec {
	t.Helper()
	pids, err := d.PodPidsLimit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return sandbox.Spec{
		Name: name, Image: testImage(t, d), Cmd: []string{"sh", "-c", script}, Network: "none",
		Labels: map[string]string{sandbox.LabelManaged: "1"},
		Limits: sandbox.Limits{CPUs: 0.5, MemoryBytes: 64 << 20, Pids: pids, TmpBytes: 8 << 20, HomeBytes: 8 << 20, WorkspaceBytes: 32 << 20},
	}
}

// createBounded creates s and removes it when the test ends; it also
// unmounts and detaches, by path, whatever of its workspace a failed test
// left (before t.TempDir's removal, registered earlier, runs).
func createBounded(t *testing.T, d *Driver, s sandbox.Spec) string {
	t.Helper()
	claim := claimName(s.Name)
	img, dev := d.imageFiles(claim)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := d.Remove(ctx, s.Name); err != nil {
			t.Errorf("remove %s: %v", s.Name, err)
		}
		if loop := loopfs.LoopOf(img, dev); loop != "" {
			t.Errorf("after Remove, %s still holds %s", loop, img)
			if mp, _ := loopfs.MountOf(loop); mp != "" {
				_ = loopfs.Unmount(mp)
			}
			_ = loopfs.Detach(loop)
		}
	})
	id, err := d.Create(t.Context(), s)
	if err != nil {
		t.Fatalf("Create %s: %v", s.Name, err)
	}
	return id
}

// awaitExit waits until sandbox id's process has exited and returns its
// exit code.
func awaitExit(t *testing.T, d *Driver, id string) int {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		in, err := d.Inspect(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if in.State == sandbox.StateExited {
			return in.ExitCode
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not exit: %+v", id, in)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// mountedAt is where the workspace of claim is mounted, "" if nowhere
// (or it has no loop device).
func mountedAt(t *testing.T, d *Driver, claim string) string {
	t.Helper()
	img, dev := d.imageFiles(claim)
	loop := loopfs.LoopOf(img, dev)
	if loop == "" {
		return ""
	}
	mp, err := loopfs.MountOf(loop)
	if err != nil {
		t.Fatal(err)
	}
	return mp
}

// A bounded hostPath workspace is an ext4 image mounted at the volume's
// directory from Create on; after a simulated reboot (unmounted and its
// loop device detached behind the driver's back) a new driver's
// RecoverWorkspaces mounts it again with its content, and the sandbox
// starts again on it; Remove unmounts it, detaches the device and deletes
// the image and the directory.
func TestBoundedRemount(t *testing.T) {
	d := cluster(t)
	s := boundedSpec(t, d, "agentd-bd-remount", `if [ -f /workspace/f ]; then [ "$(cat /workspace/f)" = kept ] && exit 5; exit 6; fi; echo kept > /workspace/f`)
	id := createBounded(t, d, s)
	claim := claimName(id)
	dir := d.hostDirOf(claim)
	if mp := mountedAt(t, d, claim); mp != dir {
		t.Fatalf("after Create the workspace is mounted at %q, want %s", mp, dir)
	}
	if err := d.Start(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if code := awaitExit(t, d, id); code != 0 {
		t.Fatalf("first run: exit %d, want 0", code)
	}
	// The reboot: mounts and loop devices gone.
	img, dev := d.imageFiles(claim)
	loop := loopfs.LoopOf(img, dev)
	if err := loopfs.Unmount(dir); err != nil {
		t.Fatal(err)
	}
	if err := loopfs.Detach(loop); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir + "/f"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("unmounted, the directory still shows f: %v", err)
	}
	cfg := os.Getenv("AGENTD_KUBECONFIG")
	if cfg == "" {
		cfg = os.Getenv("KUBECONFIG")
	}
	d2, err := New(Options{Kubeconfig: cfg, Namespace: d.ns, HostPathDir: d.hostDir, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if d.host != d2.host {
		t.Fatalf("the second driver talks to %s, the first to %s", d2.host, d.host)
	}
	defer d2.Close()
	if err := d2.RecoverWorkspaces(t.Context()); err != nil {
		t.Fatalf("RecoverWorkspaces: %v", err)
	}
	if mp := mountedAt(t, d2, claim); mp != dir {
		t.Fatalf("after RecoverWorkspaces the workspace is mounted at %q, want %s", mp, dir)
	}
	if err := d2.Start(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if code := awaitExit(t, d2, id); code != 5 {
		t.Fatalf("after the remount: exit %d, want 5 (the file the first run wrote)", code)
	}
	loop = loopfs.LoopOf(img, dev)
	if err := d2.Remove(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{img, dev, dir} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after Remove %s is left: %v", p, err)
		}
	}
	if b := loopfs.Backing(loop); b == img {
		t.Errorf("after Remove %s still holds %s", loop, img)
	}
}

// CopyRunningWorkspace copies a running sandbox's bounded workspace into
// two created ones at one instant, frozen: both get what it wrote before,
// it keeps running (the same Pod, its process not restarted) and writes
// on afterwards, and what it writes after the copy is in neither. A
// running sandbox with an unbounded workspace is refused
// (ErrNotSupported), and nothing is left frozen.
func TestCopyRunningWorkspace(t *testing.T) {
	d := cluster(t)
	src := createBounded(t, d, boundedSpec(t, d, "agentd-bd-src",
		`trap "exit 0" TERM; echo before > /workspace/a; dd if=/dev/urandom of=/workspace/r bs=1M count=4 2>/dev/null; `+
			`i=0; while :; do i=$((i+1)); echo $i > /workspace/n; [ -f /workspace/stop ] && { echo after > /workspace/b; sleep 300 & wait; }; sleep 0.1; done`))
	check := `[ "$(cat /workspace/a)" = before ] && [ "$(stat -c %s /workspace/r)" = 4194304 ] && [ ! -e /workspace/b ] && [ ! -e /workspace/stop ] && exit 0; exit 1`
	dst1 := createBounded(t, d, boundedSpec(t, d, "agentd-bd-dst1", check))
	dst2 := createBounded(t, d, boundedSpec(t, d, "agentd-bd-dst2", check))
	if err := d.Start(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	p0, err := d.cs.CoreV1().Pods(d.ns).Get(t.Context(), src, metav1GetOptions)
	if err != nil {
		t.Fatal(err)
	}
	srcDir := d.hostDirOf(claimName(src))
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(srcDir + "/r"); err == nil {
			if fi, _ := os.Stat(srcDir + "/r"); fi.Size() == 4<<20 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the source did not write its files")
		}
	}
	start := time.Now()
	if err := d.CopyRunningWorkspace(t.Context(), src, []string{dst1, dst2}); err != nil {
		t.Fatalf("CopyRunningWorkspace: %v", err)
	}
	t.Logf("copied a running 32 MiB workspace into two in %s", time.Since(start))
	n1, _ := os.ReadFile(srcDir + "/n")
	if err := os.WriteFile(srcDir+"/stop", nil, 0o644); err != nil { // not frozen: the hub writes it
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(srcDir + "/b"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			n2, _ := os.ReadFile(srcDir + "/n")
			t.Fatalf("the source did not go on after the copy (counter %q then %q)", n1, n2)
		}
	}
	in, err := d.Inspect(t.Context(), src)
	if err != nil {
		t.Fatal(err)
	}
	p1, err := d.cs.CoreV1().Pods(d.ns).Get(t.Context(), src, metav1GetOptions)
	if err != nil {
		t.Fatal(err)
	}
	if in.State != sandbox.StateRunning || p1.UID != p0.UID || restarts(p1) != 0 {
		t.Errorf("the source after the copy: %s, pod %s (was %s), %d restarts; want the same Pod running", in.State, p1.UID, p0.UID, restarts(p1))
	}
	for _, dst := range []string{dst1, dst2} {
		if err := d.Start(t.Context(), dst); err != nil {
			t.Fatal(err)
		}
		if code := awaitExit(t, d, dst); code != 0 {
			t.Errorf("%s: the check of the copy exited %d, want 0 (a before the copy, no b and no stop after it)", dst, code)
		}
	}

	// Unbounded: refused while it runs.
	us := boundedSpec(t, d, "agentd-bd-unb", `trap "exit 0" TERM; sleep 300 & wait`)
	us.Limits.WorkspaceBytes = 0
	usrc := createBounded(t, d, us)
	ud := boundedSpec(t, d, "agentd-bd-unbdst", "true")
	ud.Limits.WorkspaceBytes = 0
	udst := createBounded(t, d, ud)
	if err := d.Start(t.Context(), usrc); err != nil {
		t.Fatal(err)
	}
	if err := d.CopyRunningWorkspace(t.Context(), usrc, []string{udst}); !errors.Is(err, sandbox.ErrNotSupported) {
		t.Errorf("CopyRunningWorkspace of a running unbounded workspace: %v, want ErrNotSupported", err)
	}
}

var metav1GetOptions = metav1.GetOptions{}

// restarts is how often the Pod's containers restarted.
func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, cs := range p.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}
