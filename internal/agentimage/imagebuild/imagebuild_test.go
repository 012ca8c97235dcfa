package imagebuild

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/agentimage"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
)

// fixtureServer serves the fixture agent's release tarballs on loopback:
// /fixture/vVERSION/fixture-linux-ARCH.tar.gz holds bin "fixture", a script
// that prints its version. Version 9.9.9 is missing (404).
func fixtureServer(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^/fixture/v([0-9.]+)/fixture-linux-[a-z0-9]+\.tar\.gz$`)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := re.FindStringSubmatch(r.URL.Path)
		if m == nil || m[1] == "9.9.9" {
			http.NotFound(w, r)
			return
		}
		script := "#!/bin/sh\necho \"fixture " + m[1] + "\"\n"
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		tw := tar.NewWriter(zw)
		_ = tw.WriteHeader(&tar.Header{Name: "fixture", Mode: 0o755, Size: int64(len(script))})
		_, _ = tw.Write([]byte(script))
		_ = tw.Close()
		_ = zw.Close()
		_, _ = w.Write(buf.Bytes())
	})}
	go srv.Serve(lis)
	t.Cleanup(func() { srv.Close() })
	return "http://" + lis.Addr().String()
}

// fixtureProfile is a builder profile whose install script downloads the
// fixture agent from url.
func fixtureProfile(t *testing.T, url string) agentimage.Profile {
	t.Helper()
	p, err := agentimage.ParseProfile([]byte(`{
  "name": "fixture", "slug": "fixture", "display_name": "Fixture", "executable": "fixture",
  "strategy": "builder",
  "install": {"script": [
    "curl -fsS -o /tmp/f.tar.gz \"` + url + `/fixture/v$VERSION/fixture-linux-$ARCH.tar.gz\"",
    "tar -xzf /tmp/f.tar.gz -C \"$PREFIX/bin\" --no-same-owner fixture",
    "rm -f /tmp/f.tar.gz"
  ]},
  "limits": {"cpus": 1, "memory_mib": 512, "pids": 128},
  "network": {"default": "none"},
  "ttl": "30m", "sensitivity": "low",
  "risk_notes": ["A test fixture."],
  "self_update_env": {"FIXTURE_NO_UPDATE": "1"}
}`))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// docker runs the docker CLI and returns its combined output.
func docker(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "docker", args...).CombinedOutput()
	return string(out), err
}

// A runner image built for real, from a locally built Debian (no registry,
// no network but loopback): skipped when its content is unchanged, only the
// agent's stage re-run on a version bump, PATH restored in login shells,
// the agent's tree not writable by the agent user, old versions pruned.
func TestBuildFixture(t *testing.T) {
	// Small: every build step commits a layer, and on this engine's
	// fuse-overlayfs that walks the whole image (15 s a step on the 430 MiB
	// sandbox base, 2-3 s on this one).
	base := sandboxtest.SlimImage(t)
	url := fixtureServer(t)
	b, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := t.Context()

	project := fmt.Sprintf("test-%d", time.Now().UnixNano())
	t.Cleanup(func() {
		out, _ := exec.Command("docker", "images", "-q", Repository(project)).Output()
		for _, id := range strings.Fields(string(out)) {
			_ = exec.Command("docker", "rmi", "-f", id).Run()
		}
	})
	req := func(version string) Request {
		return Request{
			Profile: fixtureProfile(t, url),
			Render: agentimage.RenderOptions{
				AgentVersion: version,
				CustomBase:   "FROM " + base + "\nRUN echo project-body > /tmp/project-marker && cp /tmp/project-marker /etc/project-marker\n",
			},
			Project: project,
			// The tool base is the local base too: it has curl,
			// ca-certificates and tar, so no step runs apt.
			BuildArgs: map[string]string{"AGENTD_DEBIAN_IMAGE": base},
			// The install script fetches from the loopback server above.
			Network: "host",
		}
	}

	var progress bytes.Buffer
	r := req("1.2.3")
	r.Progress = &progress
	first, err := b.Build(ctx, r)
	if err != nil {
		t.Fatalf("first build: %v\n%s", err, progress.String())
	}
	if !first.Built || first.Reason != "not present" {
		t.Errorf("first build: built %v, reason %q; want built, not present", first.Built, first.Reason)
	}
	latest := LatestTag(project, "fixture")
	if want := []string{latest, Repository(project) + ":fixture-1.2.3"}; strings.Join(first.Tags, " ") != strings.Join(want, " ") {
		t.Errorf("tags %v, want %v", first.Tags, want)
	}
	label, err := docker(t, "image", "inspect", "--format", `{{index .Config.Labels "`+agentimage.LabelContentID+`"}}`, latest)
	if err != nil || strings.TrimSpace(label) != first.ContentID {
		t.Errorf("the image's content-id label %q (%v), want %s", label, err, first.ContentID)
	}

	again, err := b.Build(ctx, req("1.2.3"))
	if err != nil {
		t.Fatal(err)
	}
	if again.Built || again.Reason != "up to date" || again.Image != first.Image {
		t.Errorf("same content again: built %v, reason %q, image %s; want skipped, up to date, %s", again.Built, again.Reason, again.Image, first.Image)
	}

	bump, err := b.Build(ctx, req("1.2.4"))
	if err != nil {
		t.Fatal(err)
	}
	if !bump.Built || bump.Reason != "agent version changed (1.2.3 → 1.2.4)" {
		t.Errorf("version bump: built %v, reason %q", bump.Built, bump.Reason)
	}
	// Only the agent's stage and the runner's copy of it ran again: each
	// step the engine ran commits a layer, the expensive part of a build.
	// ARG steps commit no files, and whether the agent's `ARG
	// AGENTD_AGENT_VERSION=1.2.4` comes from the cache depends on whether
	// this engine built that version on the same tool base before (another
	// run of this test, another test): they are left out.
	var ran []string
	staged := false // global ARGs, before the first FROM, are no steps that run
	for _, s := range bump.Steps {
		staged = staged || strings.HasPrefix(s.Instruction, "FROM ")
		if staged && !s.Cached && !strings.HasPrefix(s.Instruction, "FROM ") && !strings.HasPrefix(s.Instruction, "ARG ") {
			ran = append(ran, strings.Fields(s.Instruction)[0]+" "+strings.Fields(s.Instruction)[1])
		}
	}
	wantRan := []string{
		"RUN set",                                                                                               // the agent's install
		"COPY --from=agentd-agent", "COPY --from=agentd-agent", "LABEL ai.devdepot.agentd.runner.managed=\"1\"", // the runner's copy, the labels
	}
	if strings.Join(ran, "\n") != strings.Join(wantRan, "\n") {
		t.Errorf("version bump ran these steps (not from the cache):\n%s\nwant:\n%s", strings.Join(ran, "\n"), strings.Join(wantRan, "\n"))
	}

	// In the image: PATH in a login shell, the pinned agent, the project's
	// instructions, the agent user who cannot change the agent.
	out, err := docker(t, "run", "--rm", "--network", "none", latest, "bash", "-lc",
		`command -v fixture; fixture; echo "PATH=$PATH"; cat /etc/project-marker; id -u; echo "$FIXTURE_NO_UPDATE"; pwd
		 touch /opt/agentd-tools/agents/fixture/bin/x 2>/dev/null && echo agent-tree-writable || echo agent-tree-read-only`)
	if err != nil {
		t.Fatalf("docker run: %v\n%s", err, out)
	}
	for _, want := range []string{
		"/opt/agentd-tools/bin/fixture\n", "fixture 1.2.4\n", "project-body\n", "\n1000\n", "\n1\n", "/workspace\n", "agent-tree-read-only",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("in the image, output lacks %q:\n%s", want, out)
		}
	}
	if m := regexp.MustCompile(`PATH=(\S*)`).FindStringSubmatch(out); m == nil || !strings.HasSuffix(m[1], ":/opt/agentd-tools/bin") {
		t.Errorf("PATH in a login shell does not end with the tool bin dir: %v", m)
	}

	// Prune: the 1.2.3 image is no -latest and unused; the 1.2.4 one stays.
	images, err := b.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var prunable []Image
	for _, im := range Prunable(images) {
		if im.ID == first.Image || im.ID == bump.Image {
			prunable = append(prunable, im)
		}
	}
	if len(prunable) != 1 || prunable[0].ID != first.Image || prunable[0].Agent != "fixture" {
		t.Fatalf("prunable of ours = %+v, want the 1.2.3 image %s alone", prunable, first.Image)
	}
	if err := b.Remove(ctx, prunable[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := docker(t, "image", "inspect", first.Image); err == nil {
		t.Error("the pruned image is still there")
	}
	if _, err := docker(t, "image", "inspect", latest); err != nil {
		t.Error("prune removed the -latest image")
	}

	// An install that fails (no such release) says so in one line.
	_, err = b.Build(ctx, req("9.9.9"))
	if err == nil || strings.Contains(err.Error(), "\n") ||
		!strings.Contains(err.Error(), "exited 22") || !strings.Contains(err.Error(), "404") {
		t.Errorf("a failing install: %v; want one line with the step, exit 22 and curl's 404", err)
	}
}

// Changes names what differs, for people.
func TestChanges(t *testing.T) {
	t.Parallel()
	l := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[agentimage.LabelPrefix+"input."+kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		old, new map[string]string
		want     string
	}{
		{l("agent", "npm:@x/y@1"), l("agent", "npm:@x/y@2"), "agent version changed (1 → 2)"},
		{l("agent", "npm:a@1"), l("agent", "script:a@1"), "agent source changed (npm:a@1 → script:a@1)"},
		{l("base", "managed"), l("base", "custom sha256:1"), "now on a custom base"},
		{l("base", "custom sha256:1", "node", "20"), l("base", "custom sha256:2", "node", "22", "docker", "28"),
			"project Dockerfile changed; Node.js changed (20 → 22); Docker added"},
		{l("user", "1000:1000"), l("user", "1001:1001"), "agent user changed (1000:1000 → 1001:1001)"},
		{l(), l(), "recipe or build arguments changed"},
	} {
		if got := Changes(tc.old, tc.new); got != tc.want {
			t.Errorf("Changes(%v, %v) = %q, want %q", tc.old, tc.new, got, tc.want)
		}
	}
}

func TestBuildRefusesBadInput(t *testing.T) {
	t.Parallel()
	b, err := New(Options{Host: "unix:///nonexistent/docker.sock"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	p := fixtureProfile(t, "http://127.0.0.1:1")
	for _, tc := range []struct {
		name string
		r    Request
		want string
	}{
		{"bad project", Request{Profile: p, Project: "Bad Name", Render: agentimage.RenderOptions{AgentVersion: "1"}}, "project name"},
		{"custom base without project", Request{Profile: p, Render: agentimage.RenderOptions{AgentVersion: "1", CustomBase: "FROM x\n"}}, "needs a project name"},
		{"unknown build arg", Request{Profile: p, Render: agentimage.RenderOptions{AgentVersion: "1"}, BuildArgs: map[string]string{"NOPE": "1"}}, "declares no such ARG"},
		{"engine down", Request{Profile: p, Render: agentimage.RenderOptions{AgentVersion: "1"}}, "docker engine not reachable"},
	} {
		_, err := b.Build(context.Background(), tc.r)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if tc.name == "engine down" && !errors.Is(err, ErrEngine) {
			t.Errorf("engine down: %v is not ErrEngine", err)
		}
	}
}
