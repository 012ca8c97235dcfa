package kubetest

import (
	"context"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ThawPods thaws the cgroup of every Pod of namespace ns that the driver
// froze on this host (its Pause, where the host is the node) and a failed
// test left so: a frozen Pod's tasks take no signal, so its namespace's
// deletion would wait on them for ever.
func ThawPods(ctx context.Context, cs kubernetes.Interface, ns string) {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		ThawPod(string(p.UID))
	}
}

// ThawPod thaws the cgroup of the Pod uid on this host, if the driver
// froze it: a test that deletes a paused sandbox's Pod itself (the engine
// stopping it) thaws it first, as the driver does.
func ThawPod(uid string) {
	for _, dir := range []string{"/sys/fs/cgroup/freezer/kubepods", "/sys/fs/cgroup/kubepods"} {
		for _, qos := range []string{"", "burstable", "besteffort"} {
			pod := filepath.Join(dir, qos, "pod"+uid)
			_ = os.WriteFile(filepath.Join(pod, "freezer.state"), []byte("THAWED"), 0) // v1
			_ = os.WriteFile(filepath.Join(pod, "cgroup.freeze"), []byte("0"), 0)      // v2
		}
	}
}
