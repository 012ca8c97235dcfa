// Package inventory lists what an environment offers an agent: the
// command-line tools on PATH and the installed Python packages, optionally
// minus a base inventory — so an agent's context can say what this machine
// or image adds.
package inventory

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/devdepot-ai/agentd/runner"
)

// Tool is a command on PATH.
type Tool struct {
	Name, Path, Version string
}

// Package is an installed Python distribution.
type Package struct {
	Name, Version string
}

// Inventory is what an environment offers.
type Inventory struct {
	Tools    []Tool
	Packages []Package
}

// Options says how to take the inventory.
type Options struct {
	// Env is the environment whose PATH is searched and in which versions
	// are asked (default os.Environ()).
	Env []string
	// Python is the interpreter asked for its packages (default "python3").
	Python string
	// NoVersions skips running tools to learn their versions.
	NoVersions bool
	// Timeout bounds each version query (default 2 s).
	Timeout time.Duration
}

// versionArgs are the tools whose version is cheap and safe to ask, and how.
// Other executables are listed without running them.
var versionArgs = map[string][]string{
	"bash": {"--version"}, "cargo": {"--version"}, "clang": {"--version"}, "cmake": {"--version"},
	"curl": {"--version"}, "docker": {"--version"}, "gcc": {"--version"}, "g++": {"--version"},
	"git": {"--version"}, "go": {"version"}, "java": {"-version"}, "javac": {"-version"},
	"jq": {"--version"}, "make": {"--version"}, "node": {"--version"}, "npm": {"--version"},
	"perl": {"--version"}, "pip": {"--version"}, "pip3": {"--version"}, "psql": {"--version"},
	"python": {"--version"}, "python3": {"--version"}, "ruby": {"--version"}, "rustc": {"--version"},
	"ssh": {"-V"}, "tar": {"--version"}, "uv": {"--version"}, "yarn": {"--version"}, "zsh": {"--version"},
	"kubectl": {"version", "--client"}, "terraform": {"version"}, "deno": {"--version"}, "bun": {"--version"},
}

var versionRE = regexp.MustCompile(`\d+\.\d+(\.\d+)?([-.+~][0-9A-Za-z.]+)?`)

// Take lists the tools on PATH and the Python packages.
func Take(ctx context.Context, opts Options) (Inventory, error) {
	if opts.Env == nil {
		opts.Env = os.Environ()
	}
	if opts.Python == "" {
		opts.Python = "python3"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Second
	}
	inv := Inventory{Tools: tools(envPath(opts.Env))}
	if !opts.NoVersions {
		askVersions(ctx, inv.Tools, opts)
	}
	inv.Packages = pythonPackages(ctx, opts)
	return inv, nil
}

func envPath(env []string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], "PATH="); ok {
			return v
		}
	}
	return ""
}

// tools lists the executables on path, the first of each name winning, sorted by name.
func tools(path string) []Tool {
	seen := map[string]bool{}
	var out []Tool
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if seen[name] {
				continue
			}
			p := filepath.Join(dir, name)
			fi, err := os.Stat(p) // follows links: a link to an executable counts
			if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
				continue
			}
			seen[name] = true
			out = append(out, Tool{Name: name, Path: p})
		}
	}
	slices.SortFunc(out, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// askVersions fills in the versions of well-known tools, a few at a time,
// each bounded by opts.Timeout.
func askVersions(ctx context.Context, ts []Tool, opts Options) {
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i := range ts {
		args, ok := versionArgs[ts[i].Name]
		if !ok {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(t *Tool) {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, t.Path, args...)
			cmd.Env = opts.Env
			cmd.WaitDelay = time.Second
			out, _ := cmd.CombinedOutput()
			line, _, _ := strings.Cut(string(bytes.TrimSpace(out)), "\n")
			t.Version = versionRE.FindString(line)
		}(&ts[i])
	}
	wg.Wait()
}

const listPackages = `import importlib.metadata as m, json
seen = {}
for d in m.distributions():
    n = d.metadata.get("Name")
    if n and n.lower() not in seen:
        seen[n.lower()] = (n, d.version)
print(json.dumps(sorted(seen.values(), key=lambda x: x[0].lower())))`

// pythonPackages asks the interpreter for its installed distributions; none
// when there is no interpreter.
func pythonPackages(ctx context.Context, opts Options) []Package {
	ctx, cancel := context.WithTimeout(ctx, 5*opts.Timeout)
	defer cancel()
	py, err := runner.LookPath(opts.Python, "/", opts.Env)
	if err != nil {
		return nil
	}
	cmd := exec.CommandContext(ctx, py, "-c", listPackages)
	cmd.Env = opts.Env
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if err != nil {
		return nil
	}
	var pairs [][2]string
	if json.Unmarshal(out, &pairs) != nil {
		return nil
	}
	pkgs := make([]Package, len(pairs))
	for i, p := range pairs {
		pkgs[i] = Package{Name: p[0], Version: p[1]}
	}
	return pkgs
}

// Minus returns what inv has that base does not: tools and packages whose
// name is not in base, or whose version differs from base's (a base entry
// without a version matches any version).
func (inv Inventory) Minus(base Inventory) Inventory {
	bt := map[string]string{}
	for _, t := range base.Tools {
		bt[t.Name] = t.Version
	}
	bp := map[string]string{}
	for _, p := range base.Packages {
		bp[strings.ToLower(p.Name)] = p.Version
	}
	var out Inventory
	for _, t := range inv.Tools {
		if v, ok := bt[t.Name]; ok && (v == "" || v == t.Version) {
			continue
		}
		out.Tools = append(out.Tools, t)
	}
	for _, p := range inv.Packages {
		if v, ok := bp[strings.ToLower(p.Name)]; ok && (v == "" || v == p.Version) {
			continue
		}
		out.Packages = append(out.Packages, p)
	}
	return out
}
