package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/drivertest"
)

func TestGVisorClass(t *testing.T) {
	t.Parallel()
	rc := func(name, handler string) nodev1.RuntimeClass {
		return nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: handler}
	}
	for _, tc := range []struct {
		name string
		list []nodev1.RuntimeClass
		want string
	}{
		{"none", nil, ""},
		{"no gVisor handler", []nodev1.RuntimeClass{rc("gvisor", "runc"), rc("kata", "kata")}, ""},
		{"the one", []nodev1.RuntimeClass{rc("kata", "kata"), rc("sandboxed", "runsc")}, "sandboxed"},
		{"gvisor first", []nodev1.RuntimeClass{rc("a", "runsc"), rc("gvisor", "runsc")}, "gvisor"},
		{"else the first by name", []nodev1.RuntimeClass{rc("z", "runsc"), rc("b", "runsc")}, "b"},
	} {
		if got := gvisorClass(tc.list); got != tc.want {
			t.Errorf("%s: gvisorClass = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// requireGVisor skips t unless the cluster has a RuntimeClass with gVisor's
// handler, and returns its name.
func requireGVisor(t *testing.T, d *Driver) string {
	t.Helper()
	list, err := d.runtimeClasses(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	rc := gvisorClass(list)
	if rc == "" {
		t.Skip("the cluster has no RuntimeClass with handler runsc: make k8s-up builds gVisor's runsc and shim (tools/gvisor) and creates RuntimeClass gvisor unless K8S_GVISOR=0 (docs/kubernetes.md)")
	}
	return rc
}

// The driver's runtime names: gVisor's (what the hub asks for) is listed and
// runs on the cluster's gVisor class; a runtime the cluster has no class for
// is refused at Create, before anything is made.
func TestRuntimeMapping(t *testing.T) {
	d := cluster(t)
	rc := requireGVisor(t, d)
	list, err := d.Runtimes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := list[sandbox.RuntimeGVisor]; len(got) != 1 || got[0] != gvisorHandler {
		t.Errorf("Runtimes()[%s] = %v, want [%s] (the cluster has class %s)", sandbox.RuntimeGVisor, got, gvisorHandler, rc)
	}
	for _, tc := range []struct{ rt, want string }{
		{"", ""}, {sandbox.RuntimeGVisor, rc}, {sandbox.RuntimeGVisorNet, rc}, {rc, rc},
	} {
		if got, err := d.runtimeClass(t.Context(), tc.rt); err != nil || got != tc.want {
			t.Errorf("runtimeClass(%q) = %q, %v; want %q", tc.rt, got, err, tc.want)
		}
	}
	image := testImage(t, d)
	pids, err := d.PodPidsLimit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	s := gvisorSpec("rt-absent", image, pids, "exit 0")
	s.Runtime = "agentd-absent-runtime"
	if _, err := d.Create(t.Context(), s); !errors.Is(err, sandbox.ErrNotSupported) || !strings.Contains(err.Error(), "no RuntimeClass agentd-absent-runtime") {
		t.Fatalf("Create with runtime %s: %v; want ErrNotSupported naming the class", s.Runtime, err)
	}
	if _, err := d.Inspect(t.Context(), s.Name); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("after a refused Create, Inspect: %v; want ErrNotFound (nothing made)", err)
	}
}

func gvisorSpec(name, image string, pids int64, script string) sandbox.Spec {
	return sandbox.Spec{
		Name: name, Image: image, Cmd: []string{"sh", "-c", script}, Network: "none",
		Runtime: sandbox.RuntimeGVisor,
		Limits:  sandbox.Limits{CPUs: 0.5, MemoryBytes: 256 << 20, Pids: pids, TmpBytes: 8 << 20, HomeBytes: 8 << 20},
	}
}

// A sandbox of gVisor's runtime is a Pod of the cluster's gVisor class and
// runs on gVisor's kernel (dmesg says so, as the Docker tests check); its
// output reaches the Pod's log, its exit code the driver; stopped and
// started again, it runs again.
func TestGVisorPod(t *testing.T) {
	d := cluster(t)
	rc := requireGVisor(t, d)
	image := testImage(t, d)
	pids, err := d.PodPidsLimit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	s := gvisorSpec("gvisor-pod", image, pids, `dmesg | head -n 3; echo "uid $(id -u)"; sleep 2; exit 7`)
	id, err := d.Create(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := d.Remove(ctx, id); err != nil {
			t.Errorf("remove: %v", err)
		}
	})
	for run := 1; run <= 2; run++ {
		t0 := time.Now()
		if err := d.Start(t.Context(), id); err != nil {
			t.Fatalf("run %d: start: %v", run, err)
		}
		started := time.Since(t0)
		p, err := d.cs.CoreV1().Pods(d.ns).Get(t.Context(), id, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.RuntimeClassName == nil || *p.Spec.RuntimeClassName != rc {
			t.Errorf("run %d: the Pod's runtimeClassName = %v, want %s", run, p.Spec.RuntimeClassName, rc)
		}
		info := awaitExited(t, d, id)
		if info.ExitCode != 7 {
			t.Errorf("run %d: exit code %d, want 7", run, info.ExitCode)
		}
		logs, err := d.cs.CoreV1().Pods(d.ns).GetLogs(id, &corev1.PodLogOptions{Container: container}).DoRaw(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(logs), "gVisor") || !strings.Contains(string(logs), "uid 1000") {
			t.Errorf("run %d: the Pod's log %q: want gVisor's dmesg and uid 1000", run, logs)
		}
		t.Logf("run %d: started in %v, exited %d after %v", run, started.Round(time.Millisecond), info.ExitCode, time.Since(t0).Round(time.Millisecond))
		if err := d.Stop(t.Context(), id, time.Second); err != nil {
			t.Fatalf("run %d: stop: %v", run, err)
		}
		if info, err := d.Inspect(t.Context(), id); err != nil || info.State != sandbox.StateExited || info.ExitCode != 7 {
			t.Errorf("run %d: after stop, Inspect = %+v, %v; want exited with 7", run, info, err)
		}
	}
}

// awaitExited waits (at most 2 minutes) until sandbox id has exited.
func awaitExited(t *testing.T, d *Driver, id string) sandbox.Info {
	t.Helper()
	end := time.Now().Add(2 * time.Minute)
	for {
		info, err := d.Inspect(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if info.State == sandbox.StateExited {
			return info
		}
		if time.Now().After(end) {
			t.Fatalf("sandbox %s still %s after 2 minutes", id, info.State)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// The conformance suite on gVisor's RuntimeClass: the same contracts as
// TestConformance, every sandbox a Pod of the cluster's gVisor class.
func TestConformanceGVisor(t *testing.T) {
	drivertest.Run(t, func(t *testing.T) drivertest.Harness {
		d := cluster(t)
		requireGVisor(t, d)
		image := testImage(t, d)
		pids, err := d.PodPidsLimit(t.Context())
		if err != nil || pids == 0 {
			t.Fatalf("the nodes' podPidsLimit: %d, %v; want one (make k8s-up sets 512)", pids, err)
		}
		return drivertest.Harness{
			Driver: d,
			Spec: func(t *testing.T, b drivertest.Behaviour) (sandbox.Spec, bool) {
				s := gvisorSpec("", image, pids, conformanceScripts[b])
				s.Limits.MemoryBytes = 64 << 20
				return s, true
			},
			MissingImage:   "127.0.0.1:1/agentd-test/absent:1", // loopback, nothing listens: Pull never leaves the machine
			EnforcesLimits: true,
			CannotPause:    noFreezer(nil) != "", // the Pod's cgroup holds runsc's sandbox: frozen whole
			Timeout:        3 * time.Minute,
		}
	})
}
