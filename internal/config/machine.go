package config

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/devdepot-ai/agentd/internal/durable"
)

// File names inside the config dir.
const (
	MachineFile = "machine.json" // the pairing: hub, machine id, org
	KeyFile     = "machine.key"  // the machine's Ed25519 private key, PEM
)

// ErrNotPaired means the config dir holds no pairing.
var ErrNotPaired = errors.New("this machine is not paired: run 'agentd pair --hub URL --code XXXX-XXXX'")

// Machine is what pairing stored: which hub this machine belongs to and as what.
type Machine struct {
	Hub       string `json:"hub"`        // hub URL, e.g. https://hub.example.com
	MachineID string `json:"machine_id"` // id the hub assigned
	Org       string `json:"org"`        // org it was paired into
	Name      string `json:"name"`       // name shown in `agentctl machines`
	CAFile    string `json:"ca_file,omitempty"`
}

// PermissionError says which file has loose permissions and how to fix it.
type PermissionError struct {
	Path string
	Mode fs.FileMode
	Want fs.FileMode
}

func (e *PermissionError) Error() string {
	return fmt.Sprintf("%s has mode %04o, which lets other users read the machine's secrets; fix it with: chmod %o %s",
		e.Path, e.Mode.Perm(), e.Want, e.Path)
}

// checkPrivate refuses a file or dir that group or others can access.
func checkPrivate(path string, want fs.FileMode) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return &PermissionError{Path: path, Mode: fi.Mode(), Want: want}
	}
	return nil
}

// LoadMachine reads the pairing and the key from dir, refusing files that
// others can read.
func LoadMachine(dir string) (Machine, ed25519.PrivateKey, error) {
	var m Machine
	mp := filepath.Join(dir, MachineFile)
	if _, err := os.Stat(mp); errors.Is(err, fs.ErrNotExist) {
		return m, nil, ErrNotPaired
	}
	for _, c := range []struct {
		p string
		m fs.FileMode
	}{{dir, 0o700}, {mp, 0o600}, {filepath.Join(dir, KeyFile), 0o600}} {
		if err := checkPrivate(c.p, c.m); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return m, nil, fmt.Errorf("%s is missing: the pairing is incomplete; run 'agentd pair' again", c.p)
			}
			return m, nil, err
		}
	}
	b, err := os.ReadFile(mp)
	if err != nil {
		return m, nil, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, nil, fmt.Errorf("%s: %w", mp, err)
	}
	if m.Hub == "" || m.MachineID == "" {
		return m, nil, fmt.Errorf("%s has no hub or machine_id; run 'agentd pair' again", mp)
	}
	key, err := loadKey(filepath.Join(dir, KeyFile))
	if err != nil {
		return m, nil, err
	}
	return m, key, nil
}

func loadKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%s is not a PEM private key", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s is not an Ed25519 key", path)
	}
	return key, nil
}

// NewKey generates a machine key.
func NewKey() (ed25519.PrivateKey, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	return key, err
}

// SaveMachine writes the pairing and the key into dir (created 0700), each
// file 0600 and replaced atomically.
func SaveMachine(dir string, m Machine, key ed25519.PrivateKey) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePrivate(filepath.Join(dir, KeyFile), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})); err != nil {
		return err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return writePrivate(filepath.Join(dir, MachineFile), append(b, '\n'))
}

// RemoveMachine deletes the pairing and the key; nothing to remove is not an error.
func RemoveMachine(dir string) error {
	var errs []string
	for _, f := range []string{MachineFile, KeyFile} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

func writePrivate(path string, data []byte) error {
	return durable.WriteFile(path, 0o600, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}
