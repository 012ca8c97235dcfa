package sandboxfake

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// paths are a container's host directories for this start.
type paths struct {
	workspace, home, tmp string
}

// mount maps a container path to a host directory.
type mount struct{ container, host string }

// command is the argv and environment of a container's process on the
// host: the spec's, with container paths rewritten to host directories (see
// the package doc).
func command(s sandbox.Spec, p paths) (argv, env []string) {
	var mounts []mount
	for _, m := range []mount{
		{sandbox.WorkspaceDir, p.workspace},
		{sandbox.HomeDir, p.home},
		{sandbox.AgentdDir, s.AgentdHostDir},
		{sandbox.HubSocketDir, s.HubSocketHostDir},
		{sandbox.KeyDir, s.KeyHostDir},
		{sandbox.CADir, s.CAHostDir},
	} {
		if m.host != "" {
			mounts = append(mounts, m)
		}
	}
	argv = make([]string, len(s.Cmd))
	for i, a := range s.Cmd {
		argv[i] = rewrite(a, mounts)
	}
	if s.AgentdHostDir != "" && argv[0] == filepath.Join(s.AgentdHostDir, "agentd") && slices.Contains(argv[1:], "run") &&
		!slices.ContainsFunc(argv[1:], func(a string) bool { return a == "--workspace" || strings.HasPrefix(a, "--workspace=") }) {
		argv = append(argv, "--workspace", p.workspace)
	}

	env = []string{"PATH=" + os.Getenv("PATH"), "TMPDIR=" + p.tmp}
	for _, e := range s.Env {
		if k, v, ok := strings.Cut(e, "="); ok && k != "HOME" {
			env = append(env, k+"="+rewrite(v, mounts))
		}
	}
	if s.Home != "" {
		h := rewrite(s.Home, mounts)
		env = append(env, "HOME="+h, "XDG_CONFIG_HOME="+h+"/.config", "XDG_CACHE_HOME="+h+"/.cache",
			"XDG_DATA_HOME="+h+"/.local/share", "XDG_STATE_HOME="+h+"/.local/state")
	} else {
		env = append(env, "HOME="+p.home)
	}
	return argv, env
}

// rewrite replaces each container path in s that begins a path (at the
// start, after a separator such as '=', ':', a space or a quote, or after a
// URL's "://") and ends one (at the end, or before '/' or a character that
// cannot be in a name) with its host directory.
func rewrite(s string, mounts []mount) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		if m, ok := mountAt(s, i, mounts); ok {
			b.WriteString(m.host)
			i += len(m.container)
			continue
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

func mountAt(s string, i int, mounts []mount) (mount, bool) {
	if s[i] != '/' || !(i == 0 || strings.ContainsRune(" \t=:,;\"'", rune(s[i-1])) || strings.HasSuffix(s[:i], "://")) {
		return mount{}, false
	}
	for _, m := range mounts {
		if !strings.HasPrefix(s[i:], m.container) {
			continue
		}
		if end := i + len(m.container); end == len(s) || !nameByte(s[end]) {
			return m, true
		}
	}
	return mount{}, false
}

// nameByte reports whether c can continue a file name.
func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}
