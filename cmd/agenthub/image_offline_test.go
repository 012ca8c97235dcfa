package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/agentimage/imagebuild"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
)

// TestImageBuildOffline: a real profile's real recipe, built for real with
// no network for its RUN steps (as a host without internet access would),
// fails in one line that names the step, its exit code and the last thing
// it printed, and leaves no image behind.
//
// The base is the locally built sandbox base and the tool base the local
// Debian stand-in (both have what the stages check for, so no step runs
// apt); the first step that needs the internet is the Node.js download.
func TestImageBuildOffline(t *testing.T) {
	base, slim := sandboxtest.BaseImage(t), sandboxtest.SlimImage(t)
	baseFile := filepath.Join(t.TempDir(), "Dockerfile")
	if err := os.WriteFile(baseFile, []byte("FROM "+base+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	project := fmt.Sprintf("offline-%d", time.Now().UnixNano())
	t.Cleanup(func() {
		out, _ := exec.Command("docker", "images", "-q", imagebuild.Repository(project)).Output()
		for _, id := range strings.Fields(string(out)) {
			_ = exec.Command("docker", "rmi", "-f", id).Run()
		}
	})

	for _, profile := range []string{"pi", "codex"} {
		t.Run(profile, func(t *testing.T) {
			out, errOut, err := runAgenthub(t, "", "image", "build", profile, "-q", "--network", "none",
				"--base-dockerfile", baseFile, "--project", project,
				"--build-arg", "AGENTD_DEBIAN_IMAGE="+slim)
			if err == nil {
				t.Fatalf("an offline build of %s succeeded: %q %q", profile, out, errOut)
			}
			want := regexp.MustCompile(`^build ` + profile + `: step [0-9]+/[0-9]+ RUN set -eu; .* failed: ` +
				`exited 6: curl: \(6\) Could not resolve host: nodejs\.org$`)
			if !want.MatchString(err.Error()) {
				t.Errorf("error:\n%s\nwant one line matching %s", err, want)
			}
			if out != "" || errOut != "" {
				t.Errorf("stdout %q, stderr %q; want nothing (-q)", out, errOut)
			}
			ids, _ := exec.Command("docker", "images", "-q", imagebuild.LatestTag(project, profile)).Output()
			if len(ids) != 0 {
				t.Errorf("a failed build left %s: %s", imagebuild.LatestTag(project, profile), ids)
			}
		})
	}
}
