package install

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ and the units under packaging/systemd/")

// golden compares got with the file, or rewrites the file under -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./install -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got); run go test ./install -update if the change is meant:\n%s", path, diff)
	}
}

var goldenSpecs = []struct {
	file string
	spec Spec
}{
	{"systemd-user.service", Spec{Kind: KindSystemdUser, Name: "agentd", Executable: "/home/ann/.local/bin/agentd"}},
	{"systemd-user-dirs.service", Spec{Kind: KindSystemdUser, Name: "agentd", Executable: "/opt/my tools/agentd$1",
		ConfigDir: "/home/ann/agentd config", StateDir: "/var/tmp/100%/state"}},
	{"systemd-system.service", Spec{Kind: KindSystemdSystem, Name: "agentd", Executable: "/usr/bin/agentd", User: "build"}},
	{"systemd-system-dirs.service", Spec{Kind: KindSystemdSystem, Name: "agentd", Executable: "/usr/bin/agentd", User: "build",
		ConfigDir: "/etc/agentd", StateDir: "/var/lib/agentd"}},
	{"launchd-agent.plist", Spec{Kind: KindLaunchd, Name: "ai.devdepot.agentd", Executable: "/Users/ann/bin/agentd",
		LogPath: "/Users/ann/Library/Logs/agentd.log"}},
	{"launchd-daemon.plist", Spec{Kind: KindLaunchd, Name: "ai.devdepot.agentd", Executable: "/usr/local/bin/agentd", User: "build",
		ConfigDir: "/Users/build/a&b <cfg>", StateDir: "/var/agentd", LogPath: "/Library/Logs/agentd.log"}},
	{"windows-service.txt", Spec{Kind: KindWindows, Name: "agentd", Executable: `C:\Program Files\agentd\agentd.exe`,
		ConfigDir: `C:\Users\ann\AppData\Roaming\agentd`, StateDir: `C:\Users\ann\AppData\Local\agentd`}},
}

func TestRenderGolden(t *testing.T) {
	t.Parallel()
	for _, tc := range goldenSpecs {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			got, err := Render(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", tc.file+".golden"), got)
		})
	}
}

// packagingUnits are the units the .deb and .rpm ship, rendered from the same
// templates: the user unit, and a template unit agentd@NAME.service that runs
// agentd as the account NAME.
var packagingUnits = []struct {
	file string
	spec Spec
}{
	{"agentd.service", Spec{Kind: KindSystemdUser, Name: "agentd", Executable: "/usr/bin/agentd"}},
	{"agentd@.service", Spec{Kind: KindSystemdSystem, Name: "agentd", Executable: "/usr/bin/agentd", User: "%i"}},
}

func TestPackagingUnits(t *testing.T) {
	t.Parallel()
	for _, u := range packagingUnits {
		got, err := Render(u.spec)
		if err != nil {
			t.Fatal(err)
		}
		golden(t, filepath.Join("..", "packaging", "systemd", u.file), got)
	}
}

func TestRenderRefuses(t *testing.T) {
	t.Parallel()
	for name, spec := range map[string]Spec{
		"relative executable":     {Kind: KindSystemdUser, Name: "agentd", Executable: "bin/agentd"},
		"system without user":     {Kind: KindSystemdSystem, Name: "agentd", Executable: "/usr/bin/agentd"},
		"newline in dir":          {Kind: KindSystemdUser, Name: "agentd", Executable: "/usr/bin/agentd", ConfigDir: "/a\nExecStartPre=/bin/evil"},
		"template action in path": {Kind: KindSystemdUser, Name: "agentd", Executable: "/usr/bin/{{agentd}}"},
		"user with space":         {Kind: KindSystemdSystem, Name: "agentd", Executable: "/usr/bin/agentd", User: "a b"},
		"unknown kind":            {Kind: "upstart", Name: "agentd", Executable: "/usr/bin/agentd"},
	} {
		if _, err := Render(spec); err == nil {
			t.Errorf("%s: Render succeeded, want an error", name)
		}
	}
}

func TestSystemdQuote(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/usr/bin/agentd":     "/usr/bin/agentd",
		"/opt/my tools/agent": `"/opt/my tools/agent"`,
		`/a"b\c`:              `"/a\"b\\c"`,
		"/100%/x":             `"/100%%/x"`,
		"/a$HOME":             `"/a$$HOME"`,
	} {
		if got := systemdQuote(in, true); got != want {
			t.Errorf("systemdQuote(%q) = %s, want %s", in, got, want)
		}
	}
	if got := systemdQuote("K=/a$b", false); got != "K=/a$b" {
		t.Errorf("Environment value: got %s, want $ left alone", got)
	}
}

// TestSystemdAnalyzeVerify runs systemd's own checker on the rendered units.
func TestSystemdAnalyzeVerify(t *testing.T) {
	t.Parallel()
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	dir := t.TempDir()
	exe := filepath.Join(dir, "bin dir", "agentd") // a space, to check the quoting
	if err := os.MkdirAll(filepath.Dir(exe), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	runtimeDir := filepath.Join(dir, "run") // the --user manager wants one
	if err := os.Mkdir(runtimeDir, 0o700); err != nil {
		t.Fatal(err)
	}
	verify := func(unit string, args []string) (complaints []string, out string, err error) {
		cmd := exec.CommandContext(t.Context(), sa, append(append([]string{}, args...), "verify", unit)...)
		cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+runtimeDir)
		var b bytes.Buffer
		cmd.Stdout, cmd.Stderr = &b, &b
		err = cmd.Run()
		// verify also reports on units it pulls in that may be missing in a
		// container; only lines about our unit count.
		for _, l := range strings.Split(b.String(), "\n") {
			if strings.Contains(l, "agentd.service") {
				complaints = append(complaints, l)
			}
		}
		return complaints, b.String(), err
	}
	// A broken unit first, so that a silent verify means something.
	bad := filepath.Join(dir, "bad", "agentd.service")
	if err := os.MkdirAll(filepath.Dir(bad), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("[Service]\nExecStart=relative run\nKillMode=bogus\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, out, _ := verify(bad, []string{"--user"}); len(c) == 0 {
		t.Skipf("systemd-analyze does not work here (it found nothing wrong with a broken unit):\n%s", out)
	}
	for _, tc := range []struct {
		name string
		spec Spec
		args []string
	}{
		{"user", Spec{Kind: KindSystemdUser, Name: "agentd", Executable: exe, ConfigDir: dir + "/cfg 100%", StateDir: dir + "/state"}, []string{"--user"}},
		{"system", Spec{Kind: KindSystemdSystem, Name: "agentd", Executable: exe, User: "root"}, nil},
	} {
		def, err := Render(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		unitDir := filepath.Join(dir, tc.name)
		if err := os.MkdirAll(unitDir, 0o755); err != nil {
			t.Fatal(err)
		}
		unit := filepath.Join(unitDir, "agentd.service")
		if err := os.WriteFile(unit, def, 0o644); err != nil {
			t.Fatal(err)
		}
		ours, out, err := verify(unit, tc.args)
		if len(ours) > 0 {
			t.Errorf("systemd-analyze %s verify (err %v):\n%s", strings.Join(tc.args, " "), err, strings.Join(ours, "\n"))
		} else if err != nil {
			t.Logf("systemd-analyze %s verify exited %v, nothing about agentd.service:\n%s", strings.Join(tc.args, " "), err, out)
		}
	}
}
