package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// cgroupfs is where this host's cgroups are mounted. A Pod's cgroups are
// there when this host is its node and its kubelet uses the cgroupfs
// driver: kubepods[/burstable|/besteffort]/pod<UID> in each v1 hierarchy
// (freezer, pids, …), or in the v2 unified one.
const cgroupfs = "/sys/fs/cgroup"

// freezeTimeout bounds how long Pause waits for the kernel to freeze a
// Pod's tasks (a task in an uninterruptible sleep holds it FREEZING), and
// Unpause for it to thaw them.
const freezeTimeout = 10 * time.Second

// unified reports a cgroup v2 host.
func unified() bool {
	_, err := os.Stat(filepath.Join(cgroupfs, "cgroup.controllers"))
	return err == nil
}

// kubepods is the kubelet's root of Pod cgroups in hierarchy ctrl ("" on
// v2): the directory, and whether this host has it.
func kubepods(ctrl string) (string, bool) {
	dir := filepath.Join(cgroupfs, "kubepods")
	if !unified() {
		dir = filepath.Join(cgroupfs, ctrl, "kubepods")
	}
	_, err := os.Stat(dir)
	return dir, err == nil
}

// podCgroup is the cgroup of Pod uid in hierarchy ctrl ("freezer", "pids";
// ignored on v2) on this host; false when this host has none (it is not
// the Pod's node, or its kubelet uses the systemd driver).
func podCgroup(ctrl, uid string) (string, bool) {
	root, ok := kubepods(ctrl)
	if !ok || uid == "" {
		return "", false
	}
	for _, qos := range []string{"", "burstable", "besteffort"} {
		p := filepath.Join(root, qos, "pod"+uid)
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
	}
	return "", false
}

// containerCgroup is the cgroup of the sandbox container of p in hierarchy
// ctrl on this host; false when it has none (or the container has no id
// yet).
func containerCgroup(ctrl string, p *corev1.Pod) (string, bool) {
	cs := containerStatus(p)
	if cs == nil || cs.ContainerID == "" {
		return "", false
	}
	_, id, _ := strings.Cut(cs.ContainerID, "://") // containerd://<id>
	dir, ok := podCgroup(ctrl, string(p.UID))
	if !ok || id == "" {
		return "", false
	}
	dir = filepath.Join(dir, id)
	if _, err := os.Stat(dir); err != nil {
		return "", false
	}
	return dir, true
}

// freezer controls the freezer of one Pod cgroup: v1's freezer.state
// (FROZEN, FREEZING, THAWED) or v2's cgroup.freeze with cgroup.events.
type freezer struct{ dir string }

// podFreezer is Pod uid's freezer on this host; false when this host has
// no cgroup of it.
func podFreezer(uid string) (freezer, bool) {
	dir, ok := podCgroup("freezer", uid)
	return freezer{dir}, ok
}

// frozen reports whether the Pod's tasks are frozen or being frozen.
func (f freezer) frozen() (bool, error) {
	if unified() {
		b, err := os.ReadFile(filepath.Join(f.dir, "cgroup.freeze"))
		return strings.TrimSpace(string(b)) == "1", err
	}
	b, err := os.ReadFile(filepath.Join(f.dir, "freezer.state"))
	s := strings.TrimSpace(string(b))
	return s == "FROZEN" || s == "FREEZING", err
}

// set freezes (or thaws) the Pod's tasks and waits until the kernel says
// they are. On v1 a write of FROZEN that leaves the state FREEZING (a task
// was forking) is repeated, as runc does.
func (f freezer) set(ctx context.Context, freeze bool) error {
	ctx, cancel := context.WithTimeout(ctx, freezeTimeout)
	defer cancel()
	file, val, done := "freezer.state", "THAWED", "THAWED"
	if freeze {
		val, done = "FROZEN", "FROZEN"
	}
	if unified() {
		file, val, done = "cgroup.freeze", "0", "frozen 0"
		if freeze {
			val, done = "1", "frozen 1"
		}
	}
	for {
		if err := os.WriteFile(filepath.Join(f.dir, file), []byte(val), 0); err != nil {
			return err
		}
		got, err := f.state()
		if err != nil {
			return err
		}
		if got == done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cgroup %s is %q, not %q: %w", f.dir, got, done, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// state is the freezer's state as the kernel reports it: v1's
// freezer.state, v2's "frozen 0|1" line of cgroup.events.
func (f freezer) state() (string, error) {
	if !unified() {
		b, err := os.ReadFile(filepath.Join(f.dir, "freezer.state"))
		return strings.TrimSpace(string(b)), err
	}
	b, err := os.ReadFile(filepath.Join(f.dir, "cgroup.events"))
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "frozen ") {
			return l, err
		}
	}
	return "", err
}

// noFreezer is why Pause cannot freeze Pod p here ("" when it can):
// this host has no kubelet cgroups (the hub does not run on a node), or
// none of p's (another node's Pod).
func noFreezer(p *corev1.Pod) string {
	if _, ok := kubepods("freezer"); !ok {
		return "this host has no kubelet's Pod cgroups under " + cgroupfs + " (the hub does not run on a node of the cluster with the cgroupfs driver), and the Kubernetes API has no freezer"
	}
	if p == nil {
		return ""
	}
	if _, ok := podFreezer(string(p.UID)); !ok {
		return fmt.Sprintf("its Pod runs on node %s, whose cgroups are not on this host (the hub freezes Pods of its own node only; the Kubernetes API has no freezer)", p.Spec.NodeName)
	}
	return ""
}

// running is sandbox id's Pod when its container runs; nil with the
// sandbox's state when it does not.
func (d *Driver) running(ctx context.Context, op, id string) (*corev1.Pod, sandbox.Info, error) {
	sec, err := d.record(ctx, op, id)
	if err != nil {
		return nil, sandbox.Info{}, err
	}
	p, err := d.cs.CoreV1().Pods(d.ns).Get(ctx, id, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, recordInfo(sec), nil
	case err != nil:
		return nil, sandbox.Info{}, d.fail(op+" "+id, err)
	}
	in := podInfo(sec, p)
	if p.DeletionTimestamp != nil {
		in.State = sandbox.StateOther // being deleted: stopping
	}
	if in.State != sandbox.StateRunning {
		return nil, in, nil
	}
	return p, in, nil
}

// Pause freezes the processes of the sandbox's Pod (the pause process and
// the sandbox's) with the node's cgroup freezer, when the hub runs on the
// Pod's node; elsewhere it returns sandbox.ErrNotSupported, saying why
// (the hub stops the sandbox instead). Pausing a paused sandbox is a
// no-op; one that does not run is an error.
func (d *Driver) Pause(ctx context.Context, id string) error {
	p, in, err := d.running(ctx, "pause sandbox", id)
	if err != nil {
		return err
	}
	if why := noFreezer(p); why != "" {
		return fmt.Errorf("pause sandbox %s: %w: %s; stop it instead", id, sandbox.ErrNotSupported, why)
	}
	if p == nil {
		return fmt.Errorf("pause sandbox %s: it does not run (%s)", id, in.State)
	}
	f, _ := podFreezer(string(p.UID))
	if err := f.set(ctx, true); err != nil {
		// Half frozen is neither state: thawed again, as it was.
		_ = f.set(context.WithoutCancel(ctx), false)
		return fmt.Errorf("pause sandbox %s: %w", id, err)
	}
	return nil
}

// Unpause thaws a paused sandbox's Pod; unpausing a running one is a
// no-op, one that does not run an error.
func (d *Driver) Unpause(ctx context.Context, id string) error {
	p, in, err := d.running(ctx, "unpause sandbox", id)
	if err != nil {
		return err
	}
	if p == nil {
		return fmt.Errorf("unpause sandbox %s: it does not run (%s)", id, in.State)
	}
	if err := thaw(ctx, p); err != nil {
		return fmt.Errorf("unpause sandbox %s: %w", id, err)
	}
	return nil
}

// thaw thaws Pod p's cgroup when it is on this host and frozen: a frozen
// task ignores even SIGKILL until thawed, so the kubelet could not end a
// frozen Pod that is deleted.
func thaw(ctx context.Context, p *corev1.Pod) error {
	f, ok := podFreezer(string(p.UID))
	if !ok {
		return nil
	}
	frozen, err := f.frozen()
	if errors.Is(err, fs.ErrNotExist) || err == nil && !frozen {
		return nil // gone meanwhile, or thawed
	}
	if err != nil {
		return err
	}
	return f.set(ctx, false)
}

// withFreezer is in with state paused when its Pod p runs frozen here.
func withFreezer(in sandbox.Info, p *corev1.Pod) sandbox.Info {
	if in.State != sandbox.StateRunning {
		return in
	}
	if f, ok := podFreezer(string(p.UID)); ok {
		if frozen, err := f.frozen(); err == nil && frozen {
			in.State = sandbox.StatePaused
		}
	}
	return in
}

// localNode is the cluster's node this host is, when the hub can bound a
// Pod's processes there itself (this host has the kubelet's pids cgroups):
// the node whose addresses include one of this host's, or its hostname,
// and whose kubelet keeps its Pods' cgroups where the driver looks (the
// cgroupfs driver, cgroup root /: another kubelet on this host, with a
// root of its own, does not). "" when there is none.
func (d *Driver) localNode(ctx context.Context, nodes []corev1.Node) string {
	if _, ok := kubepods("pids"); !ok {
		return ""
	}
	host, _ := os.Hostname()
	local := map[string]bool{}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				local[n.IP.String()] = true
			}
		}
	}
	for _, n := range nodes {
		for _, a := range n.Status.Addresses {
			if (a.Type == corev1.NodeHostName && a.Address == host || a.Type == corev1.NodeInternalIP && local[a.Address]) && d.rootCgroups(ctx, n.Name) {
				return n.Name
			}
		}
	}
	return ""
}

// setPids writes limit into the pids cgroup of Pod p's sandbox container
// on this host (Kubernetes has no per-container pids limit; the kubelet
// bounds the Pod by the node's podPidsLimit and leaves the container's
// cgroup to the runtime, which sets none). false when the container's
// cgroup is not here.
func setPids(p *corev1.Pod, limit int64) (bool, error) {
	dir, ok := containerCgroup("pids", p)
	if !ok {
		return false, nil
	}
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.FormatInt(limit, 10)), 0); err != nil {
		return true, fmt.Errorf("pids limit of pod %s: %w", p.Name, err)
	}
	return true, nil
}

// limitPids bounds the processes of Pod p's sandbox container to limit
// where its cgroup is on this host. A Pod pinned to this host's node
// (checkPids: no podPidsLimit bounds it) whose cgroup is not found is an
// error: it would run unbounded.
func limitPids(p *corev1.Pod, limit int64, node string) error {
	ok, err := setPids(p, limit)
	if err != nil {
		return fmt.Errorf("start sandbox %s: %w", p.Name, err)
	}
	if !ok && node != "" {
		return fmt.Errorf("start sandbox %s: its pids limit %d: the container's pids cgroup is not on this host (node %s)", p.Name, limit, node)
	}
	return nil
}

// pinnedTo is an affinity that places a Pod on node only.
func pinnedTo(node string) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}},
	}}
}

// rootCgroups reports whether node's kubelet puts its Pods' cgroups under
// /kubepods with the cgroupfs driver (its /configz).
func (d *Driver) rootCgroups(ctx context.Context, node string) bool {
	raw, err := d.cs.CoreV1().RESTClient().Get().Resource("nodes").Name(node).
		SubResource("proxy").Suffix("configz").DoRaw(ctx)
	if err != nil {
		return false
	}
	var kc struct {
		KubeletConfig struct {
			CgroupRoot   string `json:"cgroupRoot"`
			CgroupDriver string `json:"cgroupDriver"`
		} `json:"kubeletconfig"`
	}
	if json.Unmarshal(raw, &kc) != nil {
		return false
	}
	c := kc.KubeletConfig
	return (c.CgroupRoot == "" || c.CgroupRoot == "/") && (c.CgroupDriver == "" || c.CgroupDriver == "cgroupfs")
}
