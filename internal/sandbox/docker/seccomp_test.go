package docker

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/devdepot-ai/agentd/internal/sandbox/docker/seccomp"
)

// TestSeccompNoIOUring: in a real sandbox, io_uring_setup fails (EPERM:
// the profile does not allow it; engine 20.10's default profile does),
// unshare fails, and ordinary things (files, a child process, getcwd)
// work. The probe is a static Go program built from testdata, mounted
// read-only where agentd would be.
func TestSeccompNoIOUring(t *testing.T) {
	d := engine(t)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "uringprobe"), "./testdata/uringprobe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the probe: %v\n%s", err, out)
	}
	const ref = "agentd-test/driver:seccomp"
	testImage(t, d, ref, false, 1000)
	s := testSpec(t, uniqueName(t), ref, "exec sleep 300")
	s.AgentdHostDir = dir
	id := create(t, d, s)
	if err := d.Start(t.Context(), id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	out, code := execIn(t, d, id, "/opt/agentd/uringprobe")
	want := strings.Join([]string{
		"io_uring_setup errno 1 (operation not permitted)",
		"unshare_mnt errno 1 (operation not permitted)",
		"write_tmp ok",
		"exec_sh ok",
		"getwd ok",
	}, "\n")
	if diff := cmp.Diff(out, want); code != 0 || diff != "" {
		t.Errorf("probe in the sandbox: exit %d (-got +want):\n%s", code, diff)
	}
}

// The profile allows what ordinary programs call and nothing of the
// denied list; every name it allows is one the tables know.
func TestSeccompProfile(t *testing.T) {
	t.Parallel()
	allowed := seccomp.Allowed()
	for _, must := range []string{"read", "write", "openat", "execve", "mmap", "futex", "epoll_pwait", "wait4", "rt_sigreturn", "ptrace"} {
		if !contains(allowed, must) {
			t.Errorf("%s is not allowed", must)
		}
	}
	for _, never := range []string{"io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl", "unshare", "mount", "bpf", "clone", "clone3"} {
		if contains(allowed, never) {
			t.Errorf("%s is allowed without conditions", never)
		}
	}
	p := seccomp.Profile()
	if !strings.Contains(p, `"defaultAction":"SCMP_ACT_ERRNO"`) || strings.Contains(p, "io_uring") {
		t.Errorf("profile: %.300s…", p)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
