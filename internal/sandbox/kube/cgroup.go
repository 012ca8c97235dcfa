package kube

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// podCgroups are where a node's kubelet (cgroupfs driver) puts a Pod's
// pids cgroup, by QoS class: cgroup v1's pids hierarchy, then v2's unified
// one.
var podCgroups = []string{
	"/sys/fs/cgroup/pids/kubepods", "/sys/fs/cgroup/pids/kubepods/burstable", "/sys/fs/cgroup/pids/kubepods/besteffort",
	"/sys/fs/cgroup/kubepods", "/sys/fs/cgroup/kubepods/burstable", "/sys/fs/cgroup/kubepods/besteffort",
}

// localPids reads the tasks and the pids limit of the Pod uid from this
// host's cgroups, when this host is its node (the driver's hostPath
// mode); false when it finds no such cgroup. The kubelet's summary has
// no process count on every node (none on this cluster's cgroup v1 node).
func localPids(uid string) (cur, limit int64, ok bool) {
	for _, dir := range podCgroups {
		p := filepath.Join(dir, "pod"+uid)
		cur, err := readInt(filepath.Join(p, "pids.current"))
		if err != nil {
			continue
		}
		limit, err := readInt(filepath.Join(p, "pids.max")) // "max": none
		if err != nil {
			limit = 0
		}
		return cur, limit, true
	}
	return 0, 0, false
}

// localPidsOf is localPids of Pod p, its limit the sandbox container's when
// the driver set one there (setPids) below the Pod's.
func localPidsOf(p *corev1.Pod) (cur, limit int64, ok bool) {
	cur, limit, ok = localPids(string(p.UID))
	if !ok {
		return 0, 0, false
	}
	if dir, found := containerCgroup("pids", p); found {
		if c, err := readInt(filepath.Join(dir, "pids.max")); err == nil && (limit == 0 || c < limit) {
			limit = c
		}
	}
	return cur, limit, true
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}
