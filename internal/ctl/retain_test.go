package ctl_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/ctl"
)

// TestRetainFlags: --retain-head and --retain-tail of exec and sh set how
// much of a long output attach replays; bad sizes exit 125 before anything
// runs.
func TestRetainFlags(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	const size = 6 << 20 // past the default head + tail (5 MiB)
	gen := fmt.Sprintf("yes abcdefghij | head -c %d", size)
	for _, tc := range []struct {
		name  string
		flags []string
		gap   int // bytes attach reports as not retained
	}{
		{"default", nil, size - 5<<20},
		{"small", []string{"--retain-head", "64K", "--retain-tail", "64KiB"}, size - 128<<10},
		{"whole head", []string{"--retain-head", "8M"}, 0},
		{"whole tail", []string{"--retain-tail", "6291456"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := d.run(t, "", append(append([]string{"sh", "-d"}, tc.flags...), gen)...)
			id := strings.TrimSpace(r.stdout)
			if r.code != 0 || !strings.HasPrefix(id, "p-") {
				t.Fatalf("sh -d %v = %+v, want an id", tc.flags, r)
			}
			waitExited(t, d, id)
			a := d.run(t, "", "attach", id)
			want := ""
			if tc.gap > 0 {
				want = fmt.Sprintf("\n[agentctl: %d bytes of stdout not retained]\n", tc.gap)
			}
			if a.code != 0 || a.stderr != want || len(a.stdout) != size-tc.gap {
				t.Errorf("attach: exit %d, %d bytes, stderr %q; want 0, %d bytes, stderr %q", a.code, len(a.stdout), a.stderr, size-tc.gap, want)
			}
		})
	}
}

// waitExited polls ps until process id has exited: attach then replays
// what retention kept, rather than following the output live (which
// delivers every byte).
func waitExited(t *testing.T, d *daemon, id string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ps := d.run(t, "", "ps")
		for _, line := range strings.Split(ps.stdout, "\n") {
			if strings.HasPrefix(line, id) && strings.Contains(line, "exited") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has not exited after a minute: ps %+v", id, ps)
		}
		time.Sleep(50 * time.Millisecond) // poll interval, not synchronisation
	}
}

func TestRetainFlagsBadSizes(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, tc := range []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"--retain-head", "lots"}, `--retain-head: size "lots": want a whole number`},
		{[]string{"--retain-tail", "-5M"}, `--retain-tail: size "-5M": want a whole number`},
		{[]string{"--retain-head", "1.5G"}, `unit ".5G" is not one of K, M, G`},
		{[]string{"--retain-tail", "0"}, "--retain-tail 0: want a size above 0"},
		{[]string{"--retain-head", "99999999999G"}, "too large"},
		{[]string{"--retain-head", "2G"}, "retain head 2147483648 bytes: want 0 to 1073741824"}, // the daemon's limit
	} {
		for _, cmd := range []string{"exec", "sh"} {
			marker := filepath.Join(d.workspace, "ran-"+cmd+"-"+strings.ReplaceAll(tc.args[1], "/", "_"))
			args := append([]string{cmd}, tc.args...)
			if cmd == "exec" {
				args = append(args, "--", "touch", marker)
			} else {
				args = append(args, "touch "+marker)
			}
			got := d.run(t, "", args...)
			if got.code != ctl.ExitFailed || !strings.Contains(got.stderr, tc.want) {
				t.Errorf("agentctl %v = %d, stderr %q; want 125 and %q", args, got.code, got.stderr, tc.want)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("agentctl %v ran the command", args)
			}
		}
	}
}
