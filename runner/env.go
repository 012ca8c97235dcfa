package runner

import (
	"slices"
	"strings"
)

// secretPrefix starts the names of the daemon's own variables (its token,
// config and state directories, …). They never reach a child.
const secretPrefix = "AGENTD_"

// dropFromBase lists variables of the daemon's environment that describe
// the daemon itself rather than the user: the service manager's sockets and
// the shell's bookkeeping. Children do not inherit them.
var dropFromBase = []string{
	"_", "PWD", "OLDPWD",
	"NOTIFY_SOCKET", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES",
}

// CleanEnv returns env without AGENTD_* and daemon-only variables, without
// malformed entries, and with only the last entry of a repeated name.
func CleanEnv(env []string) []string {
	out := make([]string, 0, len(env))
	index := make(map[string]int, len(env))
	for _, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.HasPrefix(k, secretPrefix) || slices.Contains(dropFromBase, k) || strings.IndexByte(kv, 0) >= 0 {
			continue
		}
		if i, seen := index[k]; seen {
			out[i] = kv
			continue
		}
		index[k] = len(out)
		out = append(out, kv)
	}
	return out
}

// MergeEnv returns base with the variables of over set (new names appended
// in sorted order, for a deterministic environment).
func MergeEnv(base []string, over map[string]string) []string {
	out := make([]string, 0, len(base)+len(over))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := over[k]; ok {
			continue
		}
		out = append(out, kv)
	}
	keys := make([]string, 0, len(over))
	for k := range over {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, k+"="+over[k])
	}
	return out
}

// LookupEnv returns the value of name in env.
func LookupEnv(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v, true
		}
	}
	return "", false
}
