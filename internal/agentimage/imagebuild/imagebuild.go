// Package imagebuild builds, lists and prunes the coding agents' runner
// images on a Docker engine (agenthub image build | ls | prune).
//
// A build renders the profile's Dockerfile (package agentimage) and hands it
// to the engine with no build context. Whether to build at all is decided
// by the content id: the hash of the rendered text and the build arguments,
// which the image carries as a label. The same id on the project's -latest
// image means the same contents, so the build is skipped; a different one
// is built, and the reason is read off the labels of the inputs that
// changed ("agent version changed (1.2.3 → 1.2.4)"). The engine's own layer
// cache does the rest: the stages whose text and parents did not change are
// reused, so a new agent version re-runs only the agent's stage and the
// runner's copy of it.
//
// Images are named agentd/runner-PROJECT:AGENT-latest, and also
// :AGENT-VERSION, so an older build keeps a name until prune removes it.
// PROJECT is "managed" for the managed base, or the user's project name.
package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/client"

	"github.com/devdepot-ai/agentd/internal/agentimage"
)

// Options configure a Builder. The zero value talks to the local engine.
type Options struct {
	// Host is the engine's address, as in DOCKER_HOST. Default (""): the
	// environment, else the local socket.
	Host string
}

// Builder builds runner images on one Docker engine.
type Builder struct {
	cli  *client.Client
	host string
}

// New returns a Builder for the engine opts names; it does not contact the
// engine.
func New(opts Options) (*Builder, error) {
	copts := []client.Opt{client.FromEnv}
	if opts.Host != "" {
		copts = []client.Opt{client.WithHost(opts.Host)}
	}
	cli, err := client.New(copts...)
	if err != nil {
		return nil, fmt.Errorf("docker client for %q: %w", opts.Host, err)
	}
	return &Builder{cli: cli, host: cli.DaemonHost()}, nil
}

// Close releases the Builder's connections.
func (b *Builder) Close() error { return b.cli.Close() }

// ErrEngine is returned (wrapped) when the Docker engine cannot be reached.
var ErrEngine = errors.New("docker engine not reachable")

func (b *Builder) fail(op string, err error) error {
	if client.IsErrConnectionFailed(err) {
		return fmt.Errorf("%s: %w at %s (is dockerd running? --docker-host names another)", op, ErrEngine, b.host)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// ManagedProject is the project name of images on the managed base.
const ManagedProject = "managed"

var projectRE = regexp.MustCompile(`^[a-z0-9]+(?:[._-][a-z0-9]+)*$`)

// ValidProject checks a project name: what an image repository allows,
// lowercase letters and digits with single separators, at most 40.
func ValidProject(name string) error {
	if len(name) > 40 || !projectRE.MatchString(name) {
		return fmt.Errorf("project name %q: want lowercase letters and digits, with single '.', '_' or '-' between them, at most 40", name)
	}
	return nil
}

// Repository is the image repository of a project's runner images.
func Repository(project string) string { return "agentd/runner-" + project }

// LatestTag is the name of a project's newest image of an agent.
func LatestTag(project, agent string) string {
	return Repository(project) + ":" + agent + "-latest"
}

// versionTag is the name of a project's image of one agent version; a tag
// allows no '+', which a version may have.
func versionTag(project, agent, version string) string {
	return Repository(project) + ":" + agent + "-" + strings.ReplaceAll(version, "+", "_")
}

// Request is one build.
type Request struct {
	// Profile is the agent; it must be a builder profile.
	Profile agentimage.Profile
	// Render are the render options (version, Docker, custom base, ids).
	Render agentimage.RenderOptions
	// Project names the image family (default ManagedProject; a custom base
	// needs one of its own).
	Project string
	// BuildArgs override the Dockerfile's ARG defaults, e.g.
	// AGENTD_DEBIAN_IMAGE; they are part of the content id.
	BuildArgs map[string]string
	// Rebuild builds even when an image with the same content exists.
	Rebuild bool
	// Network is the network of the build's RUN steps ("" the engine's
	// default; "host", "none").
	Network string
	// Progress receives the engine's build output; nil discards it.
	Progress io.Writer
}

// Result says what a build did.
type Result struct {
	// Image is the image id (sha256:…).
	Image string
	// Tags are the names the image has: the -latest one first.
	Tags []string
	// ContentID is the image's content id.
	ContentID string
	// Built is false when an image with the same content was there.
	Built bool
	// Reason says why it was built ("not present", "forced", what changed),
	// or "up to date".
	Reason string
	// Steps are the build's steps, in order, with whether the engine's cache
	// answered each (empty when nothing was built).
	Steps []Step
}

// Step is one instruction of a build.
type Step struct {
	Instruction string // "RUN set -eu; …", as the engine printed it
	Cached      bool
}

// Build builds the runner image of r.Profile unless its -latest image has
// the same content id already (and r.Rebuild is not set).
func (b *Builder) Build(ctx context.Context, r Request) (Result, error) {
	if r.Project == "" {
		if r.Render.CustomBase != "" {
			return Result{}, errors.New("a custom base needs a project name for its images (--project)")
		}
		r.Project = ManagedProject
	}
	if err := ValidProject(r.Project); err != nil {
		return Result{}, err
	}
	text, err := agentimage.Render(r.Profile, r.Render)
	if err != nil {
		return Result{}, err
	}
	for k := range r.BuildArgs {
		if !strings.Contains(text, "ARG "+k+"=") && !strings.Contains(text, "ARG "+k+"\n") {
			return Result{}, fmt.Errorf("build argument %s: the Dockerfile declares no such ARG", k)
		}
	}
	id := agentimage.ContentID(text, r.BuildArgs)
	text = agentimage.SetContentID(text, id)
	labels := agentimage.Labels(text)
	version := agentVersion(labels)
	agent := r.Profile.Slug
	latest := LatestTag(r.Project, agent)
	res := Result{ContentID: id, Tags: []string{latest, versionTag(r.Project, agent, version)}}

	old, err := b.cli.ImageInspect(ctx, latest)
	switch {
	case err == nil:
		oldLabels := map[string]string{}
		if old.Config != nil {
			oldLabels = old.Config.Labels
		}
		switch {
		case r.Rebuild:
			res.Reason = "forced"
		case oldLabels[agentimage.LabelContentID] == id:
			res.Image, res.Reason = old.ID, "up to date"
			// The version tag may have been removed by hand; names cost nothing.
			if _, err := b.cli.ImageTag(ctx, client.ImageTagOptions{Source: old.ID, Target: res.Tags[1]}); err != nil {
				return res, b.fail("tag "+res.Tags[1], err)
			}
			return res, nil
		default:
			res.Reason = Changes(oldLabels, labels)
		}
	case cerrdefs.IsNotFound(err):
		res.Reason = "not present"
	default:
		return Result{}, b.fail("inspect "+latest, err)
	}

	res.Image, res.Steps, err = b.build(ctx, r, text, res.Tags)
	if err != nil {
		return Result{}, fmt.Errorf("build %s: %w", r.Profile.Name, err)
	}
	res.Built = true
	return res, nil
}

// agentVersion is the agent's version from the input.agent label
// ("npm:@openai/codex@0.153.3").
func agentVersion(labels map[string]string) string {
	in := labels[agentimage.LabelPrefix+"input.agent"]
	return in[strings.LastIndex(in, "@")+1:]
}

// Changes says what differs between an image's labels and a new render's,
// for people: "agent version changed (1.2.3 → 1.2.4); Docker added".
func Changes(old, new map[string]string) string {
	in := func(m map[string]string, k string) string { return m[agentimage.LabelPrefix+"input."+k] }
	var out []string
	if o, n := in(old, "base"), in(new, "base"); o != n {
		switch {
		case o == "managed":
			out = append(out, "now on a custom base")
		case n == "managed":
			out = append(out, "now on the managed base")
		default:
			out = append(out, "project Dockerfile changed")
		}
	}
	if o, n := in(old, "agent"), in(new, "agent"); o != n {
		oi, ni := strings.LastIndex(o, "@"), strings.LastIndex(n, "@")
		if oi > 0 && ni > 0 && o[:oi] == n[:ni] {
			out = append(out, fmt.Sprintf("agent version changed (%s → %s)", o[oi+1:], n[ni+1:]))
		} else {
			out = append(out, fmt.Sprintf("agent source changed (%s → %s)", o, n))
		}
	}
	for _, k := range []struct{ key, name string }{{"node", "Node.js"}, {"docker", "Docker"}, {"tools", "tool base"}} {
		o, n := in(old, k.key), in(new, k.key)
		switch {
		case o == n:
		case o == "":
			out = append(out, k.name+" added")
		case n == "":
			out = append(out, k.name+" removed")
		default:
			out = append(out, fmt.Sprintf("%s changed (%s → %s)", k.name, o, n))
		}
	}
	if o, n := in(old, "user"), in(new, "user"); o != n {
		out = append(out, fmt.Sprintf("agent user changed (%s → %s)", o, n))
	}
	if len(out) == 0 {
		out = append(out, "recipe or build arguments changed")
	}
	return strings.Join(out, "; ")
}

// build runs the engine's build of text and returns the image id and the
// steps it took.
func (b *Builder) build(ctx context.Context, r Request, text string, tags []string) (string, []Step, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(text)), ModTime: time.Unix(0, 0)}); err != nil {
		return "", nil, err
	}
	if _, err := io.WriteString(tw, text); err != nil {
		return "", nil, err
	}
	if err := tw.Close(); err != nil {
		return "", nil, err
	}
	args := map[string]*string{}
	for _, k := range slices.Sorted(maps.Keys(r.BuildArgs)) {
		args[k] = new(r.BuildArgs[k])
	}
	resp, err := b.cli.ImageBuild(ctx, &buf, client.ImageBuildOptions{
		Tags:        tags,
		Dockerfile:  "Dockerfile",
		BuildArgs:   args,
		Remove:      true,
		ForceRemove: true,
		NetworkMode: r.Network,
		Version:     build.BuilderV1, // the classic builder: BuildKit needs a session the engine's API 1.41 may not offer
	})
	if err != nil {
		return "", nil, b.fail("docker build", err)
	}
	defer resp.Body.Close()
	progress := r.Progress
	if progress == nil {
		progress = io.Discard
	}
	return readBuild(resp.Body, progress)
}

// buildMessage is one JSON message of the engine's build stream.
type buildMessage struct {
	Stream      string `json:"stream"`
	Error       string `json:"error"`
	ErrorDetail struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
	Aux json.RawMessage `json:"aux"`
}

var (
	stepRE    = regexp.MustCompile(`^Step (\d+/\d+) : (.*)$`)
	ansiRE    = regexp.MustCompile("\x1b\\[[0-9;]*m") // the engine colours a step's stderr
	nonZeroRE = regexp.MustCompile(`returned a non-zero code: (\d+)`)
)

// readBuild follows a build stream to its end: it copies the output to
// progress, records the steps, and turns a failure into one line naming the
// step, its exit code and the last thing it printed.
func readBuild(body io.Reader, progress io.Writer) (string, []Step, error) {
	dec := json.NewDecoder(body)
	var (
		steps    []Step
		image    string
		step     string   // "7/21 RUN …" of the step running
		lastLine string   // the last line a step printed
		pending  []string // output not yet split into lines
	)
	for {
		var m buildMessage
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			return "", steps, fmt.Errorf("reading the engine's build output: %w", err)
		}
		if m.Stream != "" {
			io.WriteString(progress, m.Stream)
			pending = append(pending, m.Stream)
			text := strings.Join(pending, "")
			lines := strings.Split(text, "\n")
			pending = []string{lines[len(lines)-1]}
			for _, line := range lines[:len(lines)-1] {
				line = ansiRE.ReplaceAllString(strings.TrimRight(line, "\r"), "")
				if sm := stepRE.FindStringSubmatch(line); sm != nil {
					step = sm[1] + " " + short(sm[2])
					steps = append(steps, Step{Instruction: sm[2]})
					lastLine = ""
					continue
				}
				if strings.TrimSpace(line) == "---> Using cache" && len(steps) > 0 {
					steps[len(steps)-1].Cached = true
				}
				if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "--->") && !strings.HasPrefix(t, "Removing intermediate") {
					lastLine = t
				}
			}
		}
		if m.Error != "" {
			msg := m.Error
			if code := nonZeroRE.FindStringSubmatch(msg); code != nil {
				msg = "exited " + code[1]
				if lastLine != "" {
					msg += ": " + lastLine
				}
			}
			if step != "" {
				return "", steps, fmt.Errorf("step %s failed: %s", step, msg)
			}
			return "", steps, errors.New(msg)
		}
		if len(m.Aux) > 0 {
			var aux struct{ ID string }
			if json.Unmarshal(m.Aux, &aux) == nil && aux.ID != "" {
				image = aux.ID
			}
		}
	}
	if image == "" {
		return "", steps, errors.New("the engine's build ended without an image id")
	}
	return image, steps, nil
}

// short cuts an instruction to its first line and 60 characters.
func short(instr string) string {
	instr, _, _ = strings.Cut(instr, "\n")
	if len(instr) > 60 {
		instr = instr[:57] + "..."
	}
	return instr
}
