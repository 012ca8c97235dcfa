package agentimage

import (
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with the file, or rewrites the file under -update.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/agentimage -update to create it)", err)
	}
	if diff := cmp.Diff(got, string(want)); diff != "" {
		t.Errorf("%s differs (-got +want); run go test ./internal/agentimage -update if the change is meant:\n%s", path, diff)
	}
}

func lookup(t *testing.T, name string) Profile {
	t.Helper()
	if strings.HasPrefix(name, "fixture-") {
		data, err := os.ReadFile(filepath.Join("testdata", "profiles", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		p, err := ParseProfile(data)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func customBaseText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "custom-base.Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRenderGolden(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file    string
		profile string
		opts    RenderOptions
		custom  bool
	}{
		// The managed base, an agent that needs Node.
		{file: "codex.Dockerfile", profile: "codex"},
		// The managed base, an agent that needs no Node (installed by a script).
		{file: "fixture-static.Dockerfile", profile: "fixture-static", opts: RenderOptions{AgentVersion: "1.2.3"}},
		// --docker, and other ids.
		{file: "claude-code-docker.Dockerfile", profile: "claude-code", opts: RenderOptions{Docker: true, UID: 1001, GID: 1001}},
		// A custom base with an earlier stage, no Docker, no Node.
		{file: "fixture-static-custom-base.Dockerfile", profile: "fixture-static", custom: true,
			opts: RenderOptions{AgentVersion: "1.2.3"}},
		// A custom base with an earlier stage, with --docker and a known digest.
		{file: "opencode-custom-base.Dockerfile", profile: "opencode", custom: true,
			opts: RenderOptions{Docker: true, BaseDigest: "sha256:" + strings.Repeat("ab", 32)}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			if tc.custom {
				tc.opts.CustomBase = customBaseText(t)
			}
			got, err := Render(lookup(t, tc.profile), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", tc.file+".golden"), got)
		})
	}
}

// TestRenderShape checks what the goldens show but a reviewer could miss:
// the stage order, that the agent's version is declared after node, that
// the custom base's earlier stage, flags and body are kept.
func TestRenderShape(t *testing.T) {
	t.Parallel()
	got, err := Render(lookup(t, "opencode"), RenderOptions{CustomBase: customBaseText(t), Docker: true})
	if err != nil {
		t.Fatal(err)
	}
	var froms []string
	for _, l := range strings.Split(got, "\n") {
		if strings.HasPrefix(l, "FROM ") {
			froms = append(froms, l)
		}
	}
	want := []string{
		"FROM docker.io/library/golang:${GO_VERSION}-bookworm AS build",
		"FROM --platform=linux/amd64 ${AGENTD_DEBIAN_IMAGE} AS agentd-tools",
		"FROM agentd-tools AS agentd-node",
		"FROM agentd-tools AS agentd-docker",
		"FROM agentd-node AS agentd-agent",
		"FROM --platform=linux/amd64 docker.io/library/python:3.12-slim-bookworm AS agentd-runner",
	}
	if diff := cmp.Diff(froms, want); diff != "" {
		t.Errorf("stages (-got +want):\n%s", diff)
	}
	if !strings.HasPrefix(got, "# syntax=docker/dockerfile:1\n") {
		t.Errorf("the parser directive is not first:\n%s", got[:80])
	}
	for _, s := range []string{
		"echo 'FROM inside a heredoc is not an instruction' > /note.txt\n",
		"# a comment inside a continuation is skipped\n",
		"RUN python3 -m pip install --user ruff\nENV LANG=C.UTF-8\nUSER root\n",
		"missing=\"$missing, $t (for dockerd)\"",
	} {
		if !strings.Contains(got, s) {
			t.Errorf("the render lacks %q", s)
		}
	}
	if i, j := strings.Index(got, "ARG AGENTD_AGENT_VERSION="), strings.Index(got, "AS agentd-agent"); i < j {
		t.Errorf("the agent's version is declared before its stage")
	}
}

// TestBumpAgentVersion: a new agent version changes the agent stage's ARG
// default, the agent's input label and the content id, and no other line.
func TestBumpAgentVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		profile string
		opts    RenderOptions
	}{
		{"codex", RenderOptions{}},
		{"claude-code", RenderOptions{Docker: true}},
		{"opencode", RenderOptions{CustomBase: customBaseText(t)}},
		{"fixture-static", RenderOptions{AgentVersion: "1.2.3"}},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			t.Parallel()
			p := lookup(t, tc.profile)
			a, err := Render(p, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			tc.opts.AgentVersion = "99.0.0-test.1"
			b, err := Render(p, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
			if len(al) != len(bl) {
				t.Fatalf("the renders have %d and %d lines", len(al), len(bl))
			}
			var changed []string
			for i := range al {
				if al[i] != bl[i] {
					changed = append(changed, lineKey(bl[i]))
				}
			}
			want := []string{"ARG AGENTD_AGENT_VERSION", labelNS + "input.agent", LabelContentID}
			if diff := cmp.Diff(changed, want); diff != "" {
				t.Errorf("changed lines (-got +want):\n%s", diff)
			}
			if !strings.Contains(b, "ARG AGENTD_AGENT_VERSION=99.0.0-test.1\n") {
				t.Errorf("the new version is not the ARG default")
			}
		})
	}
}

// lineKey is what a changed line sets: "ARG NAME" or a label key.
func lineKey(l string) string {
	l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "LABEL "))
	k, _, _ := strings.Cut(l, "=")
	return k
}

func TestContentID(t *testing.T) {
	t.Parallel()
	p := lookup(t, "codex")
	text, err := Render(p, RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(regexp.QuoteMeta(LabelContentID) + `="(sha256:[0-9a-f]{64})"`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no content id label in\n%s", text)
	}
	if got := ContentID(text, nil); got != m[1] {
		t.Errorf("ContentID(render) = %s, the label says %s", got, m[1])
	}
	if ContentID(text, map[string]string{"AGENTD_NODE_VERSION": "24.0.0"}) == m[1] {
		t.Error("a build argument does not change the content id")
	}
	ids := map[string]RenderOptions{}
	for _, o := range []RenderOptions{
		{},
		{Docker: true},
		{UID: 1001},
		{BaseDigest: "sha256:" + strings.Repeat("0", 64)},
		{CustomBase: "FROM docker.io/library/debian:bookworm-slim\n"},
		{CustomBase: "FROM docker.io/library/debian:bookworm-slim\nRUN true\n"},
	} {
		text, err := Render(p, o)
		if err != nil {
			t.Fatal(err)
		}
		id := ContentID(text, nil)
		if prev, ok := ids[id]; ok {
			t.Errorf("%+v and %+v have the same content id", prev, o)
		}
		ids[id] = o
	}
}

func TestRenderErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		profile string
		opts    RenderOptions
		is      error
		want    string
	}{
		{name: "image", profile: "aider", is: ErrNothingToBuild,
			want: "aider uses the image docker.io/paulgauthier/aider; nothing to build"},
		{name: "custom", profile: "commandcode", is: ErrImageRequired,
			want: "commandcode has no image agentd can build or pull: an image is required (agentctl agent run commandcode --image REF)"},
		{name: "version", profile: "codex", opts: RenderOptions{AgentVersion: "1.0; rm -rf /"}, want: `agent version "1.0; rm -rf /"`},
		{name: "no pin", profile: "fixture-static", want: "fixture-static has no pinned version in versions.json: give --agent-version"},
		{name: "uid", profile: "codex", opts: RenderOptions{UID: -1}, want: "uid/gid -1"},
		{name: "digest", profile: "codex", opts: RenderOptions{BaseDigest: "latest"}, want: `base digest "latest"`},
		{name: "no FROM", profile: "codex", opts: RenderOptions{CustomBase: "# nothing\nRUN true\n"}, want: "base Dockerfile: no FROM"},
		{name: "reserved stage", profile: "codex", opts: RenderOptions{CustomBase: "FROM alpine AS agentd-tools\nFROM alpine\n"},
			want: "base Dockerfile line 1: the stage name agentd-tools is reserved"},
		{name: "escape", profile: "codex", opts: RenderOptions{CustomBase: "# escape=`\nFROM alpine\n"}, want: "the escape directive"},
		{name: "heredoc", profile: "codex", opts: RenderOptions{CustomBase: "FROM alpine\nRUN <<EOT\necho\n"}, want: "base Dockerfile line 2: the heredoc <<EOT has no end"},
		{name: "bad FROM", profile: "codex", opts: RenderOptions{CustomBase: "FROM alpine AS a b\n"}, want: "want FROM [--platform=…] IMAGE [AS NAME]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Render(lookup(t, tc.profile), tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Render = %v, want an error containing %q", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("Render = %v, want errors.Is %v", err, tc.is)
			}
		})
	}
}

// TestRunSyntax parses every RUN of the goldens with sh -n, as the builder's
// /bin/sh -c would get it (continuations joined, comment lines inside them
// dropped): a quoting mistake fails here, not in a build.
func TestRunSyntax(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*.golden"))
	if err != nil || len(files) == 0 {
		t.Fatalf("goldens: %v %v", files, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		for i := 0; i < len(lines); i++ {
			if !strings.HasPrefix(lines[i], "RUN ") || strings.Contains(lines[i], "<<") {
				continue
			}
			start := i
			script := strings.TrimPrefix(lines[i], "RUN ")
			for strings.HasSuffix(script, `\`) && i+1 < len(lines) {
				i++
				if strings.HasPrefix(strings.TrimSpace(lines[i]), "#") {
					continue
				}
				script = strings.TrimSuffix(script, `\`) + lines[i]
			}
			if out, err := exec.Command(sh, "-n", "-c", script).CombinedOutput(); err != nil {
				t.Errorf("%s line %d: sh -n: %v\n%s\n%s", f, start+1, err, out, script)
			}
		}
	}
}

// Labels reads back what labels() wrote, escapes undone.
func TestLabelsReadBack(t *testing.T) {
	t.Parallel()
	text, err := Render(lookup(t, "fixture-static"), RenderOptions{AgentVersion: "1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	got := Labels(text)
	want := map[string]string{
		LabelManaged:                "1",
		LabelAgent:                  "fixture-static",
		LabelPrefix + "base":        "docker.io/library/debian:bookworm-20251229-slim@${AGENTD_BASE_DIGEST}",
		LabelPrefix + "input.base":  "managed",
		LabelPrefix + "input.tools": "docker.io/library/debian:bookworm-20251229-slim",
		LabelPrefix + "input.agent": "script:fixture-static@1.2.3",
		LabelPrefix + "input.user":  "1000:1000",
		LabelContentID:              ContentID(text, nil),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Labels (-want +got):\n%s", diff)
	}
}
