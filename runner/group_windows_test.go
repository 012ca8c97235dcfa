package runner

// Windows-only tests. They are cross-compiled and vetted, but no Windows
// machine runs them here; the unix tests do not build on Windows.

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

func TestShellCommandWindows(t *testing.T) {
	argv, line := shellCommand(`C:\Windows\System32\cmd.exe`, `echo "a b" & dir`)
	if want := []string{`C:\Windows\System32\cmd.exe`, "/d", "/s", "/c", `echo "a b" & dir`}; !slices.Equal(argv, want) {
		t.Errorf("argv %q, want %q", argv, want)
	}
	if want := `C:\Windows\System32\cmd.exe /d /s /c "echo "a b" & dir"`; line != want {
		t.Errorf("command line %q, want %q", line, want)
	}
	argv, line = shellCommand(`C:\Program Files\Git\bin\bash.exe`, "ls")
	if want := []string{`C:\Program Files\Git\bin\bash.exe`, "-c", "ls"}; !slices.Equal(argv, want) || line != "" {
		t.Errorf("bash: argv %q line %q, want %q and no line", argv, line, want)
	}
}

func TestParseSignalWindows(t *testing.T) {
	for in, want := range map[string]syscall.Signal{"TERM": syscall.SIGTERM, "sigkill": syscall.SIGKILL, "2": syscall.SIGINT} {
		if got, err := ParseSignal(in); err != nil || got != want {
			t.Errorf("ParseSignal(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"HUP", "1", "USR1", "99"} {
		if _, err := ParseSignal(in); err == nil {
			t.Errorf("ParseSignal(%q) succeeded; want an error", in)
		}
	}
}

func TestLookPathWindows(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tool.exe"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"Path=" + dir, "PATHEXT=.COM;.EXE"}
	got, err := LookPath("tool", `C:\`, env)
	if want := filepath.Join(dir, "tool.exe"); err != nil || got != want {
		t.Errorf("LookPath(tool) = %q, %v; want %q", got, err, want)
	}
	if _, err := LookPath("missing", `C:\`, env); err == nil {
		t.Error("LookPath(missing) succeeded")
	}
}
