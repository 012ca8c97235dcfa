package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestMachineRoundTripAndPermissions(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "agentd")
	if _, _, err := LoadMachine(dir); !errors.Is(err, ErrNotPaired) {
		t.Fatalf("LoadMachine of an empty dir = %v, want ErrNotPaired", err)
	}
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	want := Machine{Hub: "https://hub.example", MachineID: "m-1", Org: "acme", Name: "laptop"}
	if err := SaveMachine(dir, want, key); err != nil {
		t.Fatal(err)
	}
	got, gotKey, err := LoadMachine(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got != want || !gotKey.Equal(key) {
		t.Errorf("LoadMachine = %+v, want %+v (key equal: %v)", got, want, gotKey.Equal(key))
	}
	for _, p := range []string{dir, filepath.Join(dir, MachineFile), filepath.Join(dir, KeyFile)} {
		fi, _ := os.Stat(p)
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s mode %v is not private", p, fi.Mode().Perm())
		}
	}
	if err := os.Chmod(filepath.Join(dir, KeyFile), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = LoadMachine(dir)
	var pe *PermissionError
	if !errors.As(err, &pe) || pe.Path != filepath.Join(dir, KeyFile) {
		t.Fatalf("LoadMachine with a 0644 key = %v, want a PermissionError naming the key", err)
	}
	if err := RemoveMachine(dir); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadMachine(dir); !errors.Is(err, ErrNotPaired) {
		t.Errorf("after RemoveMachine: %v, want ErrNotPaired", err)
	}
}
