package docker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/moby/moby/client"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/docker/seccomp"
)

const (
	imageBare      = "agentd-test/driver:1"     // no /workspace
	imageWorkspace = "agentd-test/driver:ws"    // a root-owned /workspace with a file
	imageOwned     = "agentd-test/driver:owned" // a /workspace of uid 1000 with a file, as the sandbox base has
)

// hostDir is a world-readable host directory holding one file, for a
// read-only bind mount the sandbox user can read.
func hostDir(t *testing.T, file string) string {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, file), []byte(file+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// testSpec is a sandbox spec for image running script with sh.
func testSpec(t *testing.T, name, image, script string) sandbox.Spec {
	return sandbox.Spec{
		Name:             name,
		Image:            image,
		Labels:           map[string]string{sandbox.LabelManaged: "1", sandbox.LabelID: name},
		Env:              []string{"AGENTD_TEST=1", "HOME=/not-home"},
		Cmd:              []string{"sh", "-c", script},
		AgentdHostDir:    hostDir(t, "agentd"),
		HubSocketHostDir: hostDir(t, "hub.sock"),
		Network:          "none",
		Limits: sandbox.Limits{
			CPUs:        0.5,
			MemoryBytes: 64 << 20,
			Pids:        64,
			TmpBytes:    16 << 20,
			HomeBytes:   8 << 20,
		},
	}
}

// create creates s and removes it (container and volume) when the test
// ends, whatever happened.
func create(t *testing.T, d *Driver, s sandbox.Spec) string {
	t.Helper()
	t.Cleanup(func() {
		if err := d.Remove(cleanupCtx(t), s.Name); err != nil {
			t.Errorf("cleanup: remove %s: %v", s.Name, err)
		}
	})
	id, err := d.Create(t.Context(), s)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return id
}

// probe is what the sandbox's own process finds out about itself, written
// to /tmp/probe (so that it can report an unwritable workspace); then it
// waits.
const probe = `
mkdir /tmp/probe
pwd > /tmp/probe/pwd
cd /tmp/probe
id -u > uid
touch /workspace/ok 2> ws
if touch /x 2>/dev/null; then echo rw; else echo ro; fi > root
grep -E "^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):" /proc/self/status > status
tr "\000" " " < /proc/1/cmdline > pid1
echo done > done
exec sleep 300
`

func TestSandbox(t *testing.T) {
	d := engine(t)
	testImage(t, d, imageBare, false, 0)
	testImage(t, d, imageWorkspace, true, 0)
	testImage(t, d, imageOwned, true, 1000)

	t.Run("image", func(t *testing.T) {
		img, err := d.Image(t.Context(), imageBare)
		if err != nil {
			t.Fatalf("Image: %v", err)
		}
		if !strings.HasPrefix(img.ID, "sha256:") || img.Size <= 0 {
			t.Errorf("Image: ID %q, Size %d", img.ID, img.Size)
		}
		got := sandbox.Image{Labels: img.Labels, User: img.User, Env: img.Env, WorkingDir: img.WorkingDir,
			Architecture: img.Architecture, OS: img.OS}
		want := sandbox.Image{Labels: map[string]string{"org.example.test": "driver", sandbox.LabelWarm: "1"}, User: "root",
			Env: []string{"PATH=/bin"}, WorkingDir: "/", Architecture: "amd64", OS: "linux"}
		if diff := cmp.Diff(got, want); diff != "" {
			t.Errorf("Image (-got +want):\n%s", diff)
		}
		if _, err := d.Image(t.Context(), "agentd-test/driver:absent"); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("Image of a missing image: %v, want ErrNotFound", err)
		}
	})

	for _, tc := range []struct {
		name, image string
		seed        bool
	}{
		{"image without workspace", imageBare, false},
		{"image with root-owned workspace", imageWorkspace, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lifecycle(t, d, tc.image, tc.seed)
		})
	}
	// The first sandbox of an image whose /workspace is uid 1000's learns
	// it through the helper container; the next ones need none (the
	// engine's copy-up gives the volume its owner) and are the same inside.
	t.Run("image with the user's workspace", func(t *testing.T) {
		t.Parallel()
		d := engine(t) // its own driver: what it learned and its helper count
		for i, wantHelpers := range []int64{1, 1} {
			lifecycle(t, d, imageOwned, true)
			if got := d.helpers.Load(); got != wantHelpers {
				t.Errorf("after sandbox %d of %s: %d workspace helpers, want %d", i+1, imageOwned, got, wantHelpers)
			}
		}
		// An image with a root-owned /workspace always takes the helper.
		for range 2 {
			lifecycle(t, d, imageWorkspace, true)
		}
		if got := d.helpers.Load(); got != 3 {
			t.Errorf("after two sandboxes of %s: %d helpers in all, want 3", imageWorkspace, got)
		}
	})
	t.Run("stop escalates to SIGKILL", func(t *testing.T) {
		t.Parallel()
		stopKills(t, d)
	})
	t.Run("oom", func(t *testing.T) {
		t.Parallel()
		oom(t, d)
	})
	t.Run("failed create leaves nothing", func(t *testing.T) {
		t.Parallel()
		failedCreate(t, d)
	})
}

// lifecycle creates, starts, checks, stops and removes a sandbox.
func lifecycle(t *testing.T, d *Driver, image string, seed bool) {
	ctx := t.Context()
	name := uniqueName(t)
	s := testSpec(t, name, image, probe)
	id := create(t, d, s)

	i, err := d.Inspect(ctx, id)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if i.State != sandbox.StateCreated || i.Name != name || i.Image != image || i.ID != id ||
		!strings.HasPrefix(i.ImageID, "sha256:") || !i.StartedAt.IsZero() {
		t.Errorf("Inspect before start: %+v", i)
	}
	checkHardening(t, d, id, s)

	if err := d.Start(ctx, id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	poll(t, "the probe", func() bool { _, code := execIn(t, d, id, "cat /tmp/probe/done"); return code == 0 })

	zero := "0000000000000000"
	for _, c := range []struct{ what, script, want string }{
		{"uid of the process", "cat /tmp/probe/uid", "1000"},
		{"workspace writable", "cat /tmp/probe/ws; ls /workspace/ok", "/workspace/ok"},
		{"root read-only", "cat /tmp/probe/root", "ro"},
		{"capabilities and no-new-privileges", "cat /tmp/probe/status",
			"CapInh:\t" + zero + "\nCapPrm:\t" + zero + "\nCapEff:\t" + zero + "\nCapBnd:\t" + zero +
				"\nCapAmb:\t" + zero + "\nNoNewPrivs:\t1"},
		{"engine's init is PID 1", "head -c 26 /tmp/probe/pid1", "/sbin/docker-init -- sh -c"},
		{"working dir", "cat /tmp/probe/pwd", "/workspace"},
		{"owners and modes", "stat -c '%n %u:%g %a' /workspace /tmp /home/agent",
			"/workspace 1000:1000 755\n/tmp 0:0 1777\n/home/agent 1000:1000 700"},
		{"tmp exec-able", `printf '#!/bin/sh\necho tmp-exec\n' > /tmp/s && chmod +x /tmp/s && /tmp/s`, "tmp-exec"},
		{"HOME writable", `echo "$HOME" && touch "$HOME/h" && echo home-ok`, "/home/agent\nhome-ok"},
		{"env", "echo $AGENTD_TEST", "1"},
		{"agentd dir read-only", "cat /opt/agentd/agentd; touch /opt/agentd/x 2>/dev/null || echo ro", "agentd\nro"},
		{"hub dir read-only", "ls /run/agentd; touch /run/agentd/x 2>/dev/null || echo ro", "hub.sock\nro"},
		{"pids limit", "cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max", "64"},
		{"memory limit", "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max",
			fmt.Sprint(s.Limits.MemoryBytes)},
	} {
		out, code := execIn(t, d, id, c.script)
		if code != 0 || out != c.want {
			t.Errorf("%s: %q (exit %d), want %q", c.what, out, code, c.want)
		}
	}
	if seed {
		if out, _ := execIn(t, d, id, "cat /workspace/seed"); out != "seed" {
			t.Errorf("the image's /workspace content was not copied into the volume: %q", out)
		}
	}

	i, err = d.Inspect(ctx, id)
	if err != nil || i.State != sandbox.StateRunning || i.StartedAt.IsZero() {
		t.Errorf("Inspect running: %+v, %v", i, err)
	}
	list, err := d.List(ctx, map[string]string{sandbox.LabelManaged: "1", sandbox.LabelID: name})
	if err != nil || len(list) != 1 || list[0].ID != id || list[0].State != sandbox.StateRunning {
		t.Errorf("List by label: %+v, %v", list, err)
	}
	list, err = d.List(ctx, map[string]string{sandbox.LabelManaged: "0", sandbox.LabelID: name})
	if err != nil || len(list) != 0 {
		t.Errorf("List by a label value it lacks: %+v, %v", list, err)
	}

	if err := d.Stop(ctx, id, 10*time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	i, err = d.Inspect(ctx, id)
	if err != nil || i.State != sandbox.StateExited || i.ExitCode != 128+15 || i.OOMKilled {
		t.Errorf("Inspect after Stop (want exited by SIGTERM, 143): %+v, %v", i, err)
	}
	list, err = d.List(ctx, map[string]string{sandbox.LabelID: name})
	if err != nil || len(list) != 1 || list[0].State != sandbox.StateExited {
		t.Errorf("List of a stopped sandbox: %+v, %v", list, err)
	}

	if err := d.Remove(ctx, id); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if _, err := d.Inspect(ctx, id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Inspect after Remove: %v, want ErrNotFound", err)
	}
	if _, err := d.cli.VolumeInspect(ctx, volumeName(name), client.VolumeInspectOptions{}); err == nil {
		t.Errorf("volume %s survived Remove", volumeName(name))
	}
	if err := d.Remove(ctx, id); err != nil {
		t.Errorf("Remove again: %v", err)
	}
}

// hardening is what the engine stored of the hardening Create asked for.
type hardening struct {
	User, WorkingDir, StopSignal string
	Entrypoint, Cmd, Env         []string
	Labels                       map[string]string
	Init, ReadonlyRootfs         bool
	CapDrop, SecurityOpt         []string
	PidsLimit                    int64
	Memory, MemorySwap, NanoCPUs int64
	OomScoreAdj                  int
	Tmpfs                        map[string]string
	NetworkMode, Restart         string
	LogType                      string
	LogConfig                    map[string]string
	Mounts                       []string
}

func checkHardening(t *testing.T, d *Driver, id string, s sandbox.Spec) {
	t.Helper()
	res, err := d.cli.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	c, h := res.Container.Config, res.Container.HostConfig
	got := hardening{
		User: c.User, WorkingDir: c.WorkingDir, StopSignal: c.StopSignal,
		Entrypoint: c.Entrypoint, Cmd: c.Cmd, Labels: c.Labels,
		Init: h.Init != nil && *h.Init, ReadonlyRootfs: h.ReadonlyRootfs,
		CapDrop: h.CapDrop, SecurityOpt: h.SecurityOpt,
		Memory: h.Memory, MemorySwap: h.MemorySwap, NanoCPUs: h.NanoCPUs, OomScoreAdj: h.OomScoreAdj,
		Tmpfs: h.Tmpfs, NetworkMode: string(h.NetworkMode), Restart: string(h.RestartPolicy.Name),
		LogType: h.LogConfig.Type, LogConfig: h.LogConfig.Config,
	}
	if h.PidsLimit != nil {
		got.PidsLimit = *h.PidsLimit
	}
	for _, e := range c.Env {
		if !strings.HasPrefix(e, "PATH=") { // the image's
			got.Env = append(got.Env, e)
		}
	}
	for _, m := range res.Container.Mounts {
		src := m.Name // a volume's
		if m.Type == "bind" {
			src = m.Source
		}
		got.Mounts = append(got.Mounts, fmt.Sprintf("%s %s -> %s rw=%v", m.Type, src, m.Destination, m.RW))
	}
	want := hardening{
		User: "1000:1000", WorkingDir: "/workspace", StopSignal: "SIGTERM",
		Entrypoint: s.Cmd, Env: []string{"AGENTD_TEST=1", "HOME=/home/agent"},
		Labels: map[string]string{
			sandbox.LabelManaged: "1", sandbox.LabelID: s.Name, // the spec's
			"org.example.test": "driver", // the image's
			sandbox.LabelWarm:  "",       // the image's, but a hub label
		},
		Init: true, ReadonlyRootfs: true, CapDrop: []string{"ALL"}, SecurityOpt: []string{"no-new-privileges", "seccomp=" + seccomp.Profile()},
		PidsLimit: 64, Memory: 64 << 20, MemorySwap: 64 << 20, NanoCPUs: 5e8,
		Tmpfs: map[string]string{
			"/tmp":        "rw,exec,nosuid,nodev,size=16777216,mode=1777",
			"/home/agent": "rw,exec,nosuid,nodev,size=8388608,mode=0700,uid=1000,gid=1000",
		},
		NetworkMode: "none", Restart: "no",
		LogType: "json-file", LogConfig: map[string]string{"max-size": "1m", "max-file": "1"},
		Mounts: []string{
			"volume " + volumeName(s.Name) + " -> /workspace rw=true",
			"bind " + s.AgentdHostDir + " -> /opt/agentd rw=false",
			"bind " + s.HubSocketHostDir + " -> /run/agentd rw=false",
		},
	}
	if diff := cmp.Diff(got, want, cmpopts.EquateEmpty(), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("hardening (-got +want):\n%s", diff)
	}
}

// stopKills checks that Stop kills a process that ignores SIGTERM once the
// grace period is over.
func stopKills(t *testing.T, d *Driver) {
	ctx := t.Context()
	s := testSpec(t, uniqueName(t), imageBare,
		`trap "" TERM; echo > /workspace/ready; while :; do sleep 1; done`)
	id := create(t, d, s)
	if err := d.Start(ctx, id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	poll(t, "the trap", func() bool { _, code := execIn(t, d, id, "cat /workspace/ready"); return code == 0 })
	start := time.Now()
	if err := d.Stop(ctx, id, time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("Stop took %v, less than the grace period", took)
	}
	i, err := d.Inspect(ctx, id)
	if err != nil || i.State != sandbox.StateExited || i.ExitCode != 128+9 {
		t.Errorf("Inspect after Stop (want exited by SIGKILL, 137): %+v, %v", i, err)
	}
}

// oom checks that a sandbox killed for memory says so.
func oom(t *testing.T, d *Driver) {
	ctx := t.Context()
	s := testSpec(t, uniqueName(t), imageBare, `x=$(head -c 1000000000 /dev/zero | tr "\000" a); echo survived`)
	s.Limits.MemoryBytes = 32 << 20
	id := create(t, d, s)
	if err := d.Start(ctx, id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	var i sandbox.Info
	poll(t, "the sandbox to exit", func() bool {
		var err error
		if i, err = d.Inspect(ctx, id); err != nil {
			t.Fatalf("Inspect: %v", err)
		}
		return i.State == sandbox.StateExited
	})
	if !i.OOMKilled || i.ExitCode != 128+9 {
		t.Errorf("Inspect after an OOM kill: %+v", i)
	}
}

// failedCreate checks that Create removes what it made when it fails half
// way (here at the container, whose bind mount source does not exist), and
// touches nothing of a sandbox whose name it was given again.
func failedCreate(t *testing.T, d *Driver) {
	ctx := t.Context()
	name := uniqueName(t)
	s := testSpec(t, name, imageBare, "true")
	s.AgentdHostDir = "/nonexistent/agentd"
	t.Cleanup(func() { _ = d.Remove(cleanupCtx(t), name) })
	if _, err := d.Create(ctx, s); err == nil {
		t.Fatal("Create with a missing host dir succeeded")
	}
	for _, c := range []string{name, name + initSuffix} {
		if _, err := d.cli.ContainerInspect(ctx, c, client.ContainerInspectOptions{}); err == nil {
			t.Errorf("container %s left behind", c)
		}
	}
	if _, err := d.cli.VolumeInspect(ctx, volumeName(name), client.VolumeInspectOptions{}); err == nil {
		t.Errorf("volume %s left behind", volumeName(name))
	}

	// A HOME outside the workspace (or not clean) is refused before any
	// engine call.
	for _, home := range []string{"/home/x", "/workspace", "/workspace/../etc", "workspace/.home"} {
		hs := testSpec(t, name, imageBare, "true")
		hs.Home = home
		if _, err := d.Create(ctx, hs); err == nil || !strings.Contains(err.Error(), "is not a clean path under /workspace") {
			t.Errorf("Create with home %q: %v", home, err)
		}
	}

	// The name of an existing sandbox: refused, and the sandbox is intact.
	id := create(t, d, testSpec(t, name, imageBare, "true"))
	if _, err := d.Create(ctx, testSpec(t, name, imageBare, "true")); err == nil {
		t.Fatal("Create with a taken name succeeded")
	}
	if _, err := d.Inspect(ctx, id); err != nil {
		t.Errorf("the sandbox holding the name: %v", err)
	}
	if _, err := d.cli.VolumeInspect(ctx, volumeName(name), client.VolumeInspectOptions{}); err != nil {
		t.Errorf("the volume of the sandbox holding the name: %v", err)
	}
}
