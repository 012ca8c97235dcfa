package main

import (
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap/zaptest"

	"github.com/devdepot-ai/agentd/internal/hub/store"
)

// Sizes for --sandbox-workspace-max read as people write them; bad ones
// are refused, saying what is wanted.
func TestParseWorkspaceMax(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  string
	}{
		{"10GiB", 10 << 30, ""},
		{"512MiB", 512 << 20, ""},
		{"2G", 2 << 30, ""},
		{"0", 0, ""},
		{"1M", 0, "want 64MiB to 1024GiB"},
		{"2TiB", 0, "is not one of"},
		{"-1G", 0, "want a whole number"},
		{"ten", 0, "want a whole number"},
		{"1.5G", 0, "is not one of"},
	} {
		got, err := parseWorkspaceMax(tc.in)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("parseWorkspaceMax(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("parseWorkspaceMax(%q) = %d, %v; want an error with %q", tc.in, got, err, tc.err)
		}
	}
}

// Bad quota flags stop agenthub serve before it touches the engine.
func TestSandboxQuotaFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sandbox-cpus", "4096"}, "--sandbox-cpus 4096 CPUs: this host has"},
		{[]string{"--sandbox-cpus", "-1"}, "want more than 0"},
		{[]string{"--sandbox-workspace-max", "5M"}, "--sandbox-workspace-max 5M: want 64MiB"},
		{[]string{"--org-max-sandboxes", "-1"}, "--org-max-sandboxes"},
		{[]string{"--token-max-sandboxes", "-2"}, "--token-max-sandboxes"},
		{[]string{"--sandbox-workspace-max", "1G", "--docker-host", "tcp://127.0.0.1:1"}, "is not on this host"},
	} {
		var f sandboxFlags
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		f.register(fs)
		if err := fs.Parse(append([]string{"--sandboxes", "on"}, tc.args...)); err != nil {
			t.Fatal(err)
		}
		_, closeFn, err := f.options(t.Context(), t.TempDir()+"/hub.db", zaptest.NewLogger(t))
		closeFn()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want an error with %q", tc.args, err, tc.want)
		}
	}
}

// An engine this hub cannot bound workspaces on (here: the local engine
// reached over loopback TCP, as a remote one is) does not stop agenthub
// serve in --sandboxes auto: it starts without sandboxes and says why
// (a non-root user with Docker access is in the same place); with
// --sandboxes on it is an error naming both ways out.
func TestSandboxesAutoWithoutBoundedWorkspaces(t *testing.T) {
	const sock = "/var/run/docker.sock"
	if _, err := os.Stat(sock); err != nil {
		t.Skipf("no Docker engine socket (%v)", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				e, err := net.Dial("unix", sock)
				if err != nil {
					return
				}
				defer e.Close()
				go io.Copy(e, c)
				io.Copy(c, e)
			}()
		}
	}()
	host := "tcp://" + lis.Addr().String()
	for _, mode := range []string{"auto", "on"} {
		var f sandboxFlags
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		f.register(fs)
		if err := fs.Parse([]string{"--sandboxes", mode, "--docker-host", host, "--sandbox-dir", t.TempDir()}); err != nil {
			t.Fatal(err)
		}
		o, closeFn, err := f.options(t.Context(), t.TempDir()+"/hub.db", zaptest.NewLogger(t))
		closeFn()
		switch mode {
		case "auto":
			if err != nil || o.Driver != nil {
				t.Errorf("--sandboxes auto: driver %v, error %v; want no sandboxes and no error", o.Driver, err)
			}
		case "on":
			if err == nil || !strings.Contains(err.Error(), "--sandbox-workspace-max 0") || !strings.Contains(err.Error(), "--sandboxes off") {
				t.Errorf("--sandboxes on: %v; want an error naming --sandbox-workspace-max 0 and --sandboxes off", err)
			}
		}
	}
}

// The lifecycle policy's flags: defaults 5m, 30m, never; durations in
// days and "never"; --sandbox-idle-ttl is the deprecated name of
// --sandbox-stop-after (a warning on the flag set's output, stderr under
// cobra), and giving both is a usage error, as are durations too short or
// not durations.
func TestSandboxPolicyFlags(t *testing.T) {
	t.Parallel()
	parse := func(t *testing.T, args ...string) (*sandboxFlags, *strings.Builder) {
		var f sandboxFlags
		var out strings.Builder
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		fs.SetOutput(&out)
		f.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return &f, &out
	}
	for _, tc := range []struct {
		args             []string
		pause, stop, del time.Duration
		warning          bool
	}{
		{nil, 5 * time.Minute, 30 * time.Minute, store.Never, false},
		{[]string{"--sandbox-pause-after", "never", "--sandbox-stop-after", "2h", "--sandbox-delete-after", "30d"}, store.Never, 2 * time.Hour, 30 * 24 * time.Hour, false},
		{[]string{"--sandbox-idle-ttl", "45m"}, 5 * time.Minute, 45 * time.Minute, store.Never, true},
	} {
		f, out := parse(t, tc.args...)
		pause, stop, del, err := f.policy()
		if err != nil || pause != tc.pause || stop != tc.stop || del != tc.del {
			t.Errorf("%v: %v %v %v %v; want %v %v %v", tc.args, pause, stop, del, err, tc.pause, tc.stop, tc.del)
		}
		if got := strings.Contains(out.String(), "--sandbox-idle-ttl has been deprecated, use --sandbox-stop-after"); got != tc.warning {
			t.Errorf("%v: warning %v (%q), want %v", tc.args, got, out.String(), tc.warning)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sandbox-idle-ttl", "45m", "--sandbox-stop-after", "1h"}, "give one"},
		{[]string{"--sandbox-pause-after", "1s"}, "--sandbox-pause-after 1s: want at least 10s, or never"},
		{[]string{"--sandbox-delete-after", "soon"}, "--sandbox-delete-after soon: want a duration"},
		{[]string{"--sandbox-idle-ttl", "5s"}, "--sandbox-idle-ttl 5s: want at least 10s"},
	} {
		f, _ := parse(t, tc.args...)
		_, _, _, err := f.policy()
		var usage usageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want a usage error with %q", tc.args, err, tc.want)
		}
	}
}
