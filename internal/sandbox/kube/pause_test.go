package kube

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// requireNode skips t unless this host is a node of d's cluster with the
// kubelet's cgroups (the hub on the Pods' node).
func requireNode(t *testing.T, d *Driver) {
	t.Helper()
	if why := noFreezer(nil); why != "" {
		t.Skip(why)
	}
	nodes, err := d.cs.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.localNode(t.Context(), nodes.Items) == "" {
		t.Skip("this host is none of the cluster's nodes")
	}
}

// podOf is sandbox id's Pod.
func podOf(t *testing.T, d *Driver, id string) *corev1.Pod {
	t.Helper()
	p, err := d.cs.CoreV1().Pods(d.ns).Get(t.Context(), id, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// readFile is a file's trimmed content ("" when it cannot be read).
func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}

// until polls cond every 50 ms until it holds, failing t after limit.
func until(t *testing.T, limit time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok, got := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s (%s)", what, limit, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Pause freezes the Pod's cgroup on this host (the node): the sandbox's
// counter stops, Inspect and List say paused, Pause again is a no-op;
// Unpause thaws it and the counter goes on. A paused sandbox stops
// within its grace period (its TERM trap runs once thawed) and is
// removed: the kubelet could not end its frozen tasks.
func TestPauseFreezes(t *testing.T) {
	d := cluster(t)
	requireNode(t, d)
	ctx := t.Context()
	s := testSpec(t, d, "agentd-kt-freeze", nil)
	s.Cmd = []string{"sh", "-c", `trap "exit 0" TERM; i=0; while :; do i=$((i+1)); echo $i > /workspace/n.tmp; mv /workspace/n.tmp /workspace/n; sleep 0.05; done`}
	id := create(t, d, s)
	if err := d.Pause(ctx, id); err == nil || errors.Is(err, sandbox.ErrNotSupported) {
		t.Errorf("Pause of a created sandbox: %v, want an error that is not ErrNotSupported", err)
	}
	if err := d.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	counter := filepath.Join(d.hostDirOf(claimName(id)), "n")
	until(t, time.Minute, "the counter to run", func() (bool, string) { return readFile(counter) != "", "no counter" })

	if err := d.Pause(ctx, id); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if err := d.Pause(ctx, id); err != nil {
		t.Errorf("Pause of a paused sandbox: %v", err)
	}
	f, ok := podFreezer(string(podOf(t, d, id).UID))
	if !ok {
		t.Fatal("no freezer cgroup of the Pod on this host")
	}
	if st, err := f.state(); err != nil || st != "FROZEN" && st != "frozen 1" {
		t.Errorf("freezer state %q, %v; want frozen", st, err)
	}
	if in, err := d.Inspect(ctx, id); err != nil || in.State != sandbox.StatePaused {
		t.Errorf("Inspect: %s, %v; want paused", in.State, err)
	}
	if infos, err := d.List(ctx, map[string]string{sandbox.LabelID: id}); err != nil || len(infos) != 1 || infos[0].State != sandbox.StatePaused {
		t.Errorf("List: %+v, %v; want it paused", infos, err)
	}
	frozenAt := readFile(counter)
	// Twenty of its ticks: a counter that ran would have moved.
	time.Sleep(time.Second)
	if got := readFile(counter); got != frozenAt {
		t.Errorf("the counter went from %s to %s while paused", frozenAt, got)
	}
	if err := d.Unpause(ctx, id); err != nil {
		t.Fatalf("Unpause: %v", err)
	}
	if err := d.Unpause(ctx, id); err != nil {
		t.Errorf("Unpause of a running sandbox: %v", err)
	}
	until(t, 10*time.Second, "the counter to run on", func() (bool, string) {
		got := readFile(counter)
		return got != frozenAt, got
	})
	if in, err := d.Inspect(ctx, id); err != nil || in.State != sandbox.StateRunning {
		t.Errorf("Inspect after Unpause: %s, %v; want running", in.State, err)
	}

	// Stop of a paused sandbox: thawed, its trap exits 0 in its grace.
	if err := d.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if err := d.Stop(ctx, id, 30*time.Second); err != nil {
		t.Fatalf("Stop of a paused sandbox: %v", err)
	}
	in, err := d.Inspect(ctx, id)
	if err != nil || in.State != sandbox.StateExited || in.ExitCode != 0 {
		t.Errorf("after Stop: %+v, %v; want exited 0 (its TERM trap)", in, err)
	}
	t.Logf("Stop of the paused sandbox took %s", time.Since(begin).Round(time.Millisecond))
	if err := d.Unpause(ctx, id); err == nil {
		t.Error("Unpause of a stopped sandbox: nil error, want one")
	}

	// Started again and paused: Remove ends it.
	if err := d.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := d.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := d.Remove(rctx, id); err != nil {
		t.Fatalf("Remove of a paused sandbox: %v", err)
	}
	if _, err := d.Inspect(ctx, id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Inspect after Remove: %v, want ErrNotFound", err)
	}
}

// Start of a paused sandbox thaws it: it runs on.
func TestStartThawsPaused(t *testing.T) {
	d := cluster(t)
	requireNode(t, d)
	ctx := t.Context()
	id := create(t, d, testSpec(t, d, "agentd-kt-restart", nil))
	if err := d.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := d.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx, id); err != nil {
		t.Fatalf("Start of a paused sandbox: %v", err)
	}
	if in, err := d.Inspect(ctx, id); err != nil || in.State != sandbox.StateRunning {
		t.Errorf("after Start: %s, %v; want running", in.State, err)
	}
}

// A pids limit below the node's podPidsLimit, with the hub on the node:
// Create takes it, the sandbox container's pids cgroup holds it, a fork
// bomb stops at it (forks refused, counted), Stats reports it, and the
// kubelet leaves it: it reads the same after the kubelet's sync period
// and a sync the test causes (an update of the Pod).
func TestPidsLimit(t *testing.T) {
	d := cluster(t)
	requireNode(t, d)
	ctx := t.Context()
	node, err := d.PodPidsLimit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const limit = 64
	if node <= limit {
		t.Skipf("the nodes' podPidsLimit %d is not above %d", node, limit)
	}
	s := testSpec(t, d, "agentd-kt-pids", nil)
	s.Limits.Pids = limit
	// The bomb waits for the limit (Start writes it once the container
	// runs). Each sleep holds a pid; the subshell ends at its first
	// refused fork, and the main shell waits on a FIFO (no fork).
	s.Cmd = []string{"sh", "-c", `f=/sys/fs/cgroup/pids/pids.max; [ -e $f ] || f=/sys/fs/cgroup/pids.max; ` +
		`until read m < $f && [ "$m" = ` + strconv.Itoa(limit) + ` ]; do sleep 0.1; done; mkfifo /tmp/hold; ` +
		`(for i in $(seq 1 300); do sleep 600 & done) 2>/dev/null; read x < /tmp/hold`}
	id := create(t, d, s)
	if err := d.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	p := podOf(t, d, id)
	dir, ok := containerCgroup("pids", p)
	if !ok {
		t.Fatal("no pids cgroup of the sandbox container on this host")
	}
	if got := readFile(filepath.Join(dir, "pids.max")); got != strconv.Itoa(limit) {
		t.Errorf("container pids.max %q, want %d", got, limit)
	}
	until(t, time.Minute, "forks refused at the limit", func() (bool, string) {
		ev := readFile(filepath.Join(dir, "pids.events"))
		return ev != "" && ev != "max 0", ev
	})
	cur, err := readInt(filepath.Join(dir, "pids.current"))
	if err != nil || cur > limit {
		t.Errorf("container pids.current %d, %v; want at most %d", cur, err, limit)
	}
	t.Logf("the bomb holds %d pids (limit %d); pids.events %q", cur, limit, readFile(filepath.Join(dir, "pids.events")))
	st, err := d.Stats(ctx, id)
	if err != nil || st.PidsLimit != limit || st.Pids < limit {
		t.Errorf("Stats: %+v, %v; want the limit %d and at least as many tasks (the Pod's, the pause process among them)", st, err, limit)
	}

	// The kubelet's sync: a Pod update makes one at once; its period
	// makes the next.
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{"agentd.devdepot.ai/test-sync": time.Now().Format(time.RFC3339Nano)}}})
	if _, err := d.cs.CoreV1().Pods(d.ns).Patch(ctx, id, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	period := syncPeriod(t, d, p.Spec.NodeName)
	t.Logf("waiting the kubelet's sync period (%s) and 5 s", period)
	time.Sleep(period + 5*time.Second)
	if got := readFile(filepath.Join(dir, "pids.max")); got != strconv.Itoa(limit) {
		t.Errorf("container pids.max after the kubelet's syncs %q, want %d", got, limit)
	}
	if cur, _ := readInt(filepath.Join(dir, "pids.current")); cur > limit {
		t.Errorf("container pids.current %d after the kubelet's syncs, want at most %d", cur, limit)
	}
}

// syncPeriod is node's kubelet's syncFrequency (1 m when it says none).
func syncPeriod(t *testing.T, d *Driver, node string) time.Duration {
	t.Helper()
	raw, err := d.cs.CoreV1().RESTClient().Get().Resource("nodes").Name(node).SubResource("proxy").Suffix("configz").DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var kc struct {
		KubeletConfig struct {
			SyncFrequency string `json:"syncFrequency"`
		} `json:"kubeletconfig"`
	}
	if err := json.Unmarshal(raw, &kc); err != nil {
		t.Fatal(err)
	}
	if p, err := time.ParseDuration(kc.KubeletConfig.SyncFrequency); err == nil && p > 0 {
		return p
	}
	return time.Minute
}

// Off the Pod's node (its cgroup not on this host), Pause says
// ErrNotSupported and why.
func TestNoFreezerElsewhere(t *testing.T) {
	if _, ok := kubepods("freezer"); !ok {
		t.Skip("this host has no kubelet cgroups")
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "00000000-0000-0000-0000-000000000000"}, Spec: corev1.PodSpec{NodeName: "elsewhere"}}
	if why := noFreezer(p); !strings.Contains(why, "node elsewhere") {
		t.Errorf("noFreezer of another node's Pod: %q, want it to name the node", why)
	}
	if ok, err := setPids(p, 1); ok || err != nil {
		t.Errorf("setPids of another node's Pod: %v, %v; want not here", ok, err)
	}
}

// A sandbox whose Pod is deleted behind the driver's back (kubectl delete
// pod, a node drained) has exited, as a container Docker killed: not
// created, which would say it never ran (the hub's restart reconciliation
// reads it).
func TestPodDeletedOutOfBandExited(t *testing.T) {
	d := cluster(t)
	ctx := t.Context()
	id := create(t, d, testSpec(t, d, "agentd-kt-gone", nil))
	if err := d.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	if err := d.cs.CoreV1().Pods(d.ns).Delete(ctx, id, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	for {
		in, err := d.Inspect(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if in.State != sandbox.StateRunning {
			if in.State != sandbox.StateExited || in.StartedAt.IsZero() {
				t.Fatalf("after its Pod was deleted: state %s, started %v; want exited, with its start", in.State, in.StartedAt)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the Pod was never gone")
		case <-time.After(200 * time.Millisecond):
		}
	}
}
