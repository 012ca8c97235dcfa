// Package config locates agentd's configuration and state directories and
// will hold its config file format.
package config

import (
	"errors"
	"os"
	"path/filepath"
)

// StateDir is where the daemon keeps snapshots, the audit log and its
// socket: $AGENTD_STATE_DIR, else $XDG_STATE_HOME/agentd, else
// ~/.local/state/agentd.
func StateDir() (string, error) {
	if d := os.Getenv("AGENTD_STATE_DIR"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "agentd"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", errors.New("no state directory: set AGENTD_STATE_DIR or HOME")
	}
	return filepath.Join(home, ".local", "state", "agentd"), nil
}

// ConfigDir is where the daemon keeps its config and key:
// $AGENTD_CONFIG_DIR, else the OS config dir + /agentd (~/.config/agentd on Linux).
func ConfigDir() (string, error) {
	if d := os.Getenv("AGENTD_CONFIG_DIR"); d != "" {
		return d, nil
	}
	d, err := os.UserConfigDir()
	if err != nil {
		return "", errors.New("no config directory: set AGENTD_CONFIG_DIR or HOME")
	}
	return filepath.Join(d, "agentd"), nil
}

// SocketPath is the daemon's default local socket in the state dir.
func SocketPath() (string, error) {
	d, err := StateDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "agentd.sock"), nil
}
