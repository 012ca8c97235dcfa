package sandboxes

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"go.uber.org/zap"
)

// sandboxKeyFile is the key's file name in a sandbox's key mount.
const sandboxKeyFile = "key"

// A sandbox's key never goes into its container's environment, which every
// process there can read (the engine's init holds it, as the same uid as
// the workload). The hub keeps the seed in KeyDir/ID/seed, which no
// sandbox sees, and before each start of the container copies it into
// KeyDir/ID/mnt/key, the sandbox's own mount at sandbox.KeyDir: agentd
// reads it there and removes it before it runs anything.

// keyMount is the host directory mounted at sandbox.KeyDir in sandbox id.
func (m *Manager) keyMount(id string) string { return filepath.Join(m.o.KeyDir, id, "mnt") }

// saveKey keeps a new sandbox's seed and offers it to its first start.
func (m *Manager) saveKey(id string, seed []byte) error {
	dir := filepath.Join(m.o.KeyDir, id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "seed"), []byte(base64.StdEncoding.EncodeToString(seed)), 0o600); err != nil {
		return err
	}
	// uid 1000 in the sandbox removes the key from here; KeyDir (0700)
	// keeps everyone else on the host out.
	mnt := m.keyMount(id)
	if err := os.MkdirAll(mnt, 0o777); err != nil {
		return err
	}
	if err := os.Chmod(mnt, 0o777); err != nil {
		return err
	}
	return m.offerKey(id)
}

// offerKey puts the sandbox's key where its agentd reads it at start. A
// sandbox of a hub that gave keys in the environment has no seed here:
// nothing to do.
func (m *Manager) offerKey(id string) error {
	seed, err := os.ReadFile(filepath.Join(m.o.KeyDir, id, "seed"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sandbox key: %w", err)
	}
	tmp, err := os.CreateTemp(m.keyMount(id), ".key-*")
	if err != nil {
		return fmt.Errorf("sandbox key: %w", err)
	}
	_, err = tmp.Write(seed)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(m.keyMount(id), sandboxKeyFile))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("sandbox key: %w", err)
	}
	if m.o.TunnelDial && m.tunnelCAPEM != nil {
		// What agentd trusts for the hub's TCP listener.
		if err := writeFileAtomic(filepath.Join(m.keyMount(id), hubCAFile), m.tunnelCAPEM, 0o644); err != nil {
			return fmt.Errorf("sandbox tunnel CA: %w", err)
		}
	}
	return nil
}

// removeKey forgets a removed sandbox's key.
func (m *Manager) removeKey(id string) {
	if m.o.KeyDir == "" || !IsID(id) || filepath.Base(id) != id {
		return
	}
	if err := os.RemoveAll(filepath.Join(m.o.KeyDir, id)); err != nil {
		m.log.Warn("removing a sandbox's key", zap.String("sandbox", id), zap.Error(err))
	}
}
