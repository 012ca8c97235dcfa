package inventory

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func writeExe(t *testing.T, path, script string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestTakeAndMinus(t *testing.T) {
	t.Parallel()
	a, b := t.TempDir(), t.TempDir()
	writeExe(t, filepath.Join(a, "git"), `echo "git version 2.39.5"`)
	writeExe(t, filepath.Join(b, "git"), `echo "git version 9.9.9"`) // shadowed by a's
	writeExe(t, filepath.Join(b, "mytool"), `echo should-not-run; exit 1`)
	if err := os.WriteFile(filepath.Join(b, "notexec"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(b, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + a + ":" + b + ":relative/ignored"}
	inv, err := Take(t.Context(), Options{Env: env, Python: filepath.Join(a, "nopython")})
	if err != nil {
		t.Fatal(err)
	}
	want := []Tool{
		{Name: "git", Path: filepath.Join(a, "git"), Version: "2.39.5"},
		{Name: "mytool", Path: filepath.Join(b, "mytool")},
	}
	if diff := cmp.Diff(want, inv.Tools); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if len(inv.Packages) != 0 {
		t.Errorf("packages without python = %v", inv.Packages)
	}
	got := inv.Minus(Inventory{Tools: []Tool{{Name: "git", Version: "2.39.5"}}})
	if diff := cmp.Diff([]Tool{want[1]}, got.Tools); diff != "" {
		t.Errorf("minus base (-want +got):\n%s", diff)
	}
	got = inv.Minus(Inventory{Tools: []Tool{{Name: "git", Version: "2.0"}}})
	if len(got.Tools) != 2 {
		t.Errorf("a different base version should keep git: %v", got.Tools)
	}
}

func TestPythonPackages(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 on PATH")
	}
	inv, err := Take(t.Context(), Options{NoVersions: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Packages) == 0 {
		t.Fatal("no python packages found (pip at least is expected)")
	}
	for _, p := range inv.Packages {
		if p.Name == "" || p.Version == "" {
			t.Errorf("package without name or version: %+v", p)
		}
	}
}
