package sdktest

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// TestReadmeExampleAgainstDemo runs the README's Python example, as the
// README prints it, against `agenthub demo`'s hub (it stays up after its
// script and prints the export line the example reads): once on the demo's
// machine, and once in a builtin sandbox as the example's comment offers
// when the demo runs sandboxes.
func TestReadmeExampleAgainstDemo(t *testing.T) {
	needPython(t)
	example := readmeExample(t)
	demo := exec.Command(filepath.Join(binDir, "agenthub"), "demo")
	demo.Env = append(os.Environ(), "PATH="+binDir+":"+os.Getenv("PATH"))
	stdout, err := demo.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	demo.Stderr = os.Stderr
	if err := demo.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	t.Cleanup(func() {
		// Ctrl-C, as a user ends it: the demo removes its sandboxes.
		_ = demo.Process.Signal(syscall.SIGINT)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("agenthub demo after SIGINT: %v", err)
			}
		case <-time.After(90 * time.Second):
			_ = demo.Process.Kill()
			t.Error("agenthub demo did not end within 90s of SIGINT")
		}
	})

	// The transcript, until the export line (then the rest is drained).
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- demo.Wait()
	}()
	var transcript strings.Builder
	var exports, sandboxes string
	deadline := time.After(3 * time.Minute)
	for exports == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("agenthub demo ended before its export line:\n%s", transcript.String())
			}
			transcript.WriteString(l + "\n")
			if strings.Contains(l, "sandboxes on:") {
				sandboxes = l
			}
			if s := strings.TrimSpace(l); strings.HasPrefix(s, "export AGENTD_HUB=") {
				exports = strings.TrimPrefix(s, "export ")
			}
		case <-deadline:
			t.Fatalf("no export line from agenthub demo within 3m:\n%s", transcript.String())
		}
	}
	go func() {
		for range lines {
		}
	}()
	env := append(os.Environ(), "PYTHONPATH="+sdkDir(t), "PYTHONDONTWRITEBYTECODE=1")
	env = append(env, strings.Fields(exports)...)

	targets := map[string]string{"machine": example}
	if sandboxes != "" {
		box := `box = hub.sandbox(env="builtin", conversation="c-42")`
		line := regexp.MustCompile(`(?m)^box = hub\.machine\(.*$`)
		if !line.MatchString(example) {
			t.Fatalf("the README's example has no `box = hub.machine(…)` line to swap:\n%s", example)
		}
		targets["sandbox"] = line.ReplaceAllString(example, box)
	} else if exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", sandbox.BaseImage).Run() == nil {
		t.Fatalf("the engine has %s, but the demo runs no sandboxes:\n%s", sandbox.BaseImage, transcript.String())
	} else {
		t.Logf("no %s here (make sandbox-base), so only the machine half runs:\n%s", sandbox.BaseImage, transcript.String())
	}
	for name, code := range targets {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(python, "-c", code)
			cmd.Env, cmd.Dir = env, t.TempDir()
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("the README's example on the %s: %v\n%s", name, err, out)
			}
			for _, want := range []string{"done\n", "exit 0\n", "42\n"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("the README's example on the %s printed no %q:\n%s", name, want, out)
				}
			}
		})
	}
}

// readmeExample is the Python block of the README's "From Python" section.
func readmeExample(t *testing.T) string {
	t.Helper()
	f, err := os.Open(filepath.Join(sdkDir(t), "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "### From Python")
	if i < 0 {
		t.Fatal(`README.md has no "### From Python" section`)
	}
	s = s[i:]
	start := strings.Index(s, "```python\n")
	if start < 0 {
		t.Fatal("the README's From Python section has no python block")
	}
	s = s[start+len("```python\n"):]
	end := strings.Index(s, "```")
	if end < 0 {
		t.Fatal("the README's python block does not end")
	}
	return s[:end]
}
