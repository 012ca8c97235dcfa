package sandboxtest_test

import (
	"encoding/json"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
)

// run is docker run --rm as the sandbox user, with a read-only root and no
// network (as a sandbox runs), of IMAGE with ARGV; it returns the trimmed
// combined output.
func run(t *testing.T, mounts []string, image string, argv ...string) string {
	t.Helper()
	args := []string{"run", "--rm", "--user", sandbox.ContainerUser, "--read-only", "--network", "none"}
	for _, m := range mounts {
		args = append(args, "-v", m)
	}
	args = append(append(args, image), argv...)
	out, err := exec.CommandContext(t.Context(), "docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// imageConfig is the part of docker image inspect's Config checked here.
type imageConfig struct {
	User       string
	WorkingDir string
	Env        []string
	Labels     map[string]string
}

func inspect(t *testing.T, image string) imageConfig {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "docker", "image", "inspect", "--format", "{{json .Config}}", image).Output()
	if err != nil {
		t.Fatalf("docker image inspect %s: %v", image, err)
	}
	var c imageConfig
	if err := json.Unmarshal(out, &c); err != nil {
		t.Fatalf("docker image inspect %s: %v\n%s", image, err, out)
	}
	return c
}

var buildID = regexp.MustCompile(`^[0-9a-f]{12}$`)

// checkConfig checks what every sandbox image built by the script has.
func checkConfig(t *testing.T, image string) {
	t.Helper()
	c := inspect(t, image)
	if got := c.Labels[sandbox.LabelBaseMarker]; got != sandbox.BaseContract {
		t.Errorf("label %s = %q, want %q", sandbox.LabelBaseMarker, got, sandbox.BaseContract)
	}
	if got := c.Labels[sandbox.LabelBaseBuild]; !buildID.MatchString(got) {
		t.Errorf("label %s = %q, want 12 hex digits", sandbox.LabelBaseBuild, got)
	}
	if c.User != sandbox.ContainerUser {
		t.Errorf("USER = %q, want %q", c.User, sandbox.ContainerUser)
	}
	if c.WorkingDir != sandbox.WorkspaceDir {
		t.Errorf("WORKDIR = %q, want %q", c.WorkingDir, sandbox.WorkspaceDir)
	}
	wantEnv := []string{"HOME=" + sandbox.HomeDir, "PATH=/home/agent/.local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	if diff := cmp.Diff(c.Env, wantEnv); diff != "" {
		t.Errorf("ENV (-got +want):\n%s", diff)
	}
}

func TestBaseImage(t *testing.T) {
	t.Parallel()
	image := sandboxtest.BaseImage(t)
	if image != sandbox.BaseImage {
		t.Fatalf("BaseImage = %q, want %q", image, sandbox.BaseImage)
	}
	t.Run("config", func(t *testing.T) {
		t.Parallel()
		checkConfig(t, image)
	})
	for _, tc := range []struct{ name, script, want string }{
		{"uid 1000", "id -u; id -g", "1000\n1000"},
		{"workdir /workspace owned by 1000", `pwd; stat -c '%u:%g %a' .`, "/workspace\n1000:1000 755"},
		{"home", `echo "$HOME"; stat -c '%u:%g' "$HOME"`, "/home/agent\n1000:1000"},
		{"tools on PATH", `for c in bash python3 python pip node npm git rg curl jq less file xz ps; do command -v "$c" >/dev/null || echo "no $c"; done; echo checked`, "checked"},
		{"pip", `pip --version | grep -o '(python 3[.0-9]*)'`, "(python 3.11)"},
		{"pip installs for 1000", `python3 -c 'import site; print(site.ENABLE_USER_SITE)'; grep -x 'break-system-packages = true' /etc/pip.conf`, "True\nbreak-system-packages = true"},
		{"python3", `python3 -c 'print(6 * 7)'`, "42"},
		{"node", `node -e 'console.log(6 * 7)'`, "42"},
		{"no apt lists", `ls /var/lib/apt/lists | wc -l`, "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := run(t, nil, image, "bash", "-c", tc.script); got != tc.want {
				t.Errorf("%s: got %q, want %q", tc.script, got, tc.want)
			}
		})
	}
}

func TestMinimalImage(t *testing.T) {
	t.Parallel()
	image := sandboxtest.MinimalImage(t)
	t.Run("config", func(t *testing.T) {
		t.Parallel()
		checkConfig(t, image)
	})
	for _, tc := range []struct{ name, script, want string }{
		{"sh", "echo ok", "ok"},
		{"uid 1000 in /workspace", `id -u; pwd; stat -c '%u' .`, "1000\n/workspace\n1000"},
		{"no bash", "test ! -e /bin/bash && ! command -v bash && echo none", "none"},
		{"no glibc or any shared library", "ls -d /lib /lib64 /usr/lib 2>/dev/null; echo end", "end"},
		{"no python", "command -v python3 python || echo none", "none"},
		{"/tmp is 1777", "stat -c %a /tmp", "1777"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := run(t, nil, image, "sh", "-c", tc.script); got != tc.want {
				t.Errorf("%s: got %q, want %q", tc.script, got, tc.want)
			}
		})
	}
	t.Run("static agentd runs", func(t *testing.T) {
		t.Parallel()
		dir := sandboxtest.AgentdBinary(t)
		got := run(t, []string{dir + ":" + sandbox.AgentdDir + ":ro"}, image, sandbox.AgentdDir+"/agentd", "version")
		if !strings.HasPrefix(got, "agentd ") {
			t.Errorf("agentd version in %s: %q, want agentd …", image, got)
		}
	})
}
