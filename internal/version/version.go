// Package version holds the build's version, commit and date, set at link
// time with -ldflags "-X github.com/devdepot-ai/agentd/internal/version.Version=…".
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set by the linker; the defaults describe a development build.
var (
	Version = "dev"
	Commit  = ""
	Date    = ""
)

// String is a one-line description: "agentd dev (commit abc1234, built …, go1.26)".
func String(program string) string {
	commit, date := Commit, Date
	if commit == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					commit = s.Value
				case "vcs.time":
					if date == "" {
						date = s.Value
					}
				}
			}
		}
	}
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if commit == "" {
		commit = "unknown"
	}
	if date == "" {
		date = "unknown"
	}
	return fmt.Sprintf("%s %s (commit %s, built %s, %s %s/%s)", program, Version, commit, date, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
