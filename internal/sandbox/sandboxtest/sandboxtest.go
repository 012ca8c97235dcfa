// Package sandboxtest gives tests what a sandbox needs on a real Docker
// engine: the sandbox base image, a minimal busybox-only image, and a static
// agentd to mount into them.
//
// It exists because no registry can be reached here or in CI: the images
// cannot be pulled, so they are built locally by scripts/sandbox-base.sh
// (make sandbox-base), and a test that needs one must build it first. Doing
// that once, in one place, keeps every test package from carrying its own
// copy of "is docker there, is the image there, build it, do not build it
// twice". The images are shared by every test process on the engine, so the
// build runs under a file lock; within a process it runs once.
//
// The helpers skip a test only when there is no Docker engine to use (no
// docker command, or docker info fails), and fail it, with the script's
// output, when the engine is there but the build fails: a broken build must
// not pass as a skipped test.
package sandboxtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

const (
	// MinimalImageRef is the busybox-only image: no bash, no glibc, no
	// python; the base marker labels. It stands in for Alpine-style images.
	MinimalImageRef = "agentd-test/minimal:1"
	// SlimImageRef stands in for Debian's slim image: a minbase rootfs with
	// ca-certificates and curl, as root; small, so build steps FROM it
	// commit fast.
	SlimImageRef = "agentd-test/debian-slim:1"

	modulePath = "github.com/devdepot-ai/agentd"
	script     = "scripts/sandbox-base.sh"
	// buildTimeout bounds one run of the script; a fresh base build takes
	// about a minute with a fast mirror.
	buildTimeout = 15 * time.Minute
)

// Process-wide guards: every test of a package shares one build of each
// image and of agentd (what sync.Once is for; they hold no other state).
var (
	baseOnce    = &imageOnce{ref: sandbox.BaseImage, flag: "--base"}
	minimalOnce = &imageOnce{ref: MinimalImageRef, flag: "--minimal"}
	slimOnce    = &imageOnce{ref: SlimImageRef, flag: "--slim"}
	agentdOnce  onceResult
)

// BaseImage returns the sandbox base image's reference
// (ghcr.io/devdepot-ai/sandbox-base:1), built by scripts/sandbox-base.sh when
// it is missing or was built by another version of the script.
func BaseImage(t testing.TB) string {
	t.Helper()
	return baseOnce.get(t)
}

// SlimImage returns the reference of the Debian slim stand-in
// (SlimImageRef), built like BaseImage.
func SlimImage(t testing.TB) string {
	t.Helper()
	return slimOnce.get(t)
}

// MinimalImage returns the reference of the busybox-only test image
// (MinimalImageRef), built like BaseImage.
func MinimalImage(t testing.TB) string {
	t.Helper()
	return minimalOnce.get(t)
}

// AgentdBinary returns a directory holding a static Linux agentd (CGO off,
// built from this checkout once per test process), to be mounted read-only at
// sandbox.AgentdDir.
//
// The directory is os.TempDir()/agentd-sandboxtest-HASH, HASH taken from the
// repository's path: one per checkout, replaced (atomically, by rename) by
// each test process rather than a new one per process, so nothing piles up
// and no TestMain is needed to clean up. The go build cache makes the
// rebuild cheap.
func AgentdBinary(t testing.TB) string {
	t.Helper()
	agentdOnce.once.Do(func() {
		agentdOnce.value, agentdOnce.err = buildAgentd()
	})
	if agentdOnce.err != nil {
		t.Fatalf("sandboxtest: %v", agentdOnce.err)
	}
	return agentdOnce.value
}

// RepoRoot returns the root of the agentd module: the first directory at or
// above the working directory (a test's package directory) whose go.mod
// declares github.com/devdepot-ai/agentd.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && isAgentdModule(b) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod of " + modulePath + " at or above the working directory")
		}
		dir = parent
	}
}

func isAgentdModule(gomod []byte) bool {
	for _, line := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return f[1] == modulePath
		}
	}
	return false
}

type onceResult struct {
	once  sync.Once
	value string
	skip  string // set: no engine, the reason to skip
	err   error
}

// imageOnce builds one image at most once per process.
type imageOnce struct {
	ref  string
	flag string // the script's flag that builds only this image
	onceResult
}

func (o *imageOnce) get(t testing.TB) string {
	t.Helper()
	o.once.Do(func() {
		if o.skip = dockerUnavailable(); o.skip == "" {
			o.err = buildImage(o.ref, o.flag)
		}
	})
	switch {
	case o.skip != "":
		t.Skipf("sandboxtest: no Docker engine to run %s on: %s", o.ref, o.skip)
	case o.err != nil:
		t.Fatalf("sandboxtest: %v", o.err)
	}
	return o.ref
}

// dockerUnavailable says why no Docker engine can be used, or "".
func dockerUnavailable() string {
	if _, err := exec.LookPath("docker"); err != nil {
		return "docker is not installed (no docker on PATH)"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("docker info failed (%v): %s", err, bytes.TrimSpace(out))
	}
	return ""
}

// buildImage runs scripts/sandbox-base.sh FLAG under the file lock. The
// script is run even when the image exists: it compares the image's build
// label with its own build id and does nothing (in about 0.1 s) when they
// match, so a test never runs against an image an older script built.
func buildImage(ref, flag string) error {
	root, err := RepoRoot()
	if err != nil {
		return fmt.Errorf("building %s: %w", ref, err)
	}
	unlock, err := lockFile(filepath.Join(os.TempDir(), "agentd-sandboxtest-images.lock"))
	if err != nil {
		return fmt.Errorf("building %s: %w", ref, err)
	}
	defer unlock()

	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, script), flag)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s failed (%w); its output:\n%s", script, flag, err, out)
	}
	if out, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", ref).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s succeeded but docker image inspect %s failed: %s", script, flag, ref, bytes.TrimSpace(out))
	}
	return nil
}

// buildAgentd builds the static agentd into its directory and returns it.
func buildAgentd() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", fmt.Errorf("building agentd: %w", err)
	}
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(os.TempDir(), "agentd-sandboxtest-"+hex.EncodeToString(sum[:6]))
	unlock, err := lockFile(dir + ".lock")
	if err != nil {
		return "", fmt.Errorf("building agentd: %w", err)
	}
	defer unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("building agentd: %w", err)
	}
	// Readable by the container's uid 1000 whatever the umask.
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", fmt.Errorf("building agentd: %w", err)
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".agentd-%d", os.Getpid()))
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "grpcnotrace", "-o", tmp, "./cmd/agentd")
	cmd.Dir = root
	// GOOS=linux: the containers are Linux whatever the host (Docker Desktop).
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("CGO_ENABLED=0 go build ./cmd/agentd failed (%w):\n%s", err, out)
	}
	if err := checkStatic(tmp); err != nil {
		os.Remove(tmp)
		return "", err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "agentd")); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("building agentd: %w", err)
	}
	return dir, nil
}

// checkStatic fails for a binary that needs a dynamic loader (an ELF with a
// PT_INTERP header): it would not start on an image without glibc.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("reading the agentd binary: %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("the agentd binary %s is dynamically linked (an ELF interpreter): it would not run on an image without glibc", path)
		}
	}
	return nil
}
