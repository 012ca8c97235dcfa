// Package listen parses the daemon's address syntax (unix:///path,
// tcp://host:port) and opens listeners and dial targets for it.
package listen

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Addr is a parsed address: Network is "unix" or "tcp".
type Addr struct {
	Network string
	Address string // socket path, or host:port
}

// String returns the address in URL form.
func (a Addr) String() string { return a.Network + "://" + a.Address }

// Parse parses "unix:///path/agentd.sock", "unix:relative.sock",
// "tcp://127.0.0.1:7777" or a bare path (taken as a unix socket; on
// Windows also C:\path\agentd.sock).
func Parse(s string) (Addr, error) {
	switch {
	case s == "":
		return Addr{}, errors.New("empty address: want unix:///path/agentd.sock or tcp://127.0.0.1:PORT")
	case strings.ContainsRune(s, 0):
		return Addr{}, errors.New("address contains a NUL byte")
	case strings.HasPrefix(s, "unix://"):
		p := strings.TrimPrefix(s, "unix://")
		if p == "" {
			return Addr{}, fmt.Errorf("address %q has no socket path: want unix:///path/agentd.sock", s)
		}
		return Addr{"unix", p}, nil
	case strings.HasPrefix(s, "unix:"):
		return Addr{"unix", strings.TrimPrefix(s, "unix:")}, nil
	case strings.HasPrefix(s, "tcp://"):
		hp := strings.TrimPrefix(s, "tcp://")
		if _, _, err := net.SplitHostPort(hp); err != nil {
			return Addr{}, fmt.Errorf("address %q: %v: want tcp://HOST:PORT", s, err)
		}
		return Addr{"tcp", hp}, nil
	case strings.Contains(s, "://"):
		return Addr{}, fmt.Errorf("address %q: unknown scheme; want unix:// or tcp://", s)
	case strings.HasPrefix(s, "/") || strings.HasPrefix(s, ".") || filepath.IsAbs(s): // IsAbs: C:\ on Windows
		return Addr{"unix", s}, nil
	}
	return Addr{}, fmt.Errorf("address %q: want unix:///path/agentd.sock or tcp://HOST:PORT", s)
}

// IsLoopback reports whether a tcp address is on a loopback interface (or a
// unix socket, which is always local).
func (a Addr) IsLoopback() bool {
	if a.Network == "unix" {
		return true
	}
	host, _, err := net.SplitHostPort(a.Address)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// ErrInUse is the error (wrapped) of Listen when a live process already
// serves the unix socket: a second daemon must not take it over.
var ErrInUse = errors.New("already serving on this socket")

// Serving reports whether a live process serves the unix socket path.
func Serving(path string) bool {
	fi, err := os.Lstat(path)
	if err != nil || !isSocketFile(fi) {
		return false
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// Listen opens a listener. A unix socket is created with mode 0600; a stale
// socket file left by a dead daemon is replaced, but a live one is not.
func Listen(a Addr) (net.Listener, error) {
	if a.Network != "unix" {
		return net.Listen(a.Network, a.Address)
	}
	if fi, err := os.Lstat(a.Address); err == nil {
		if !isSocketFile(fi) {
			// Never remove what is not a socket: it may be someone's file.
			return nil, fmt.Errorf("%s exists and is not a socket; refusing to replace it: choose another path, or remove it yourself", a.Address)
		}
		c, err := net.DialTimeout("unix", a.Address, time.Second)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: another agentd is %w", a.Address, ErrInUse)
		}
		if !isRefused(err) {
			return nil, fmt.Errorf("%s exists and is not a socket agentd can reuse: %w", a.Address, err)
		}
		if err := os.Remove(a.Address); err != nil {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	}
	return listenPrivate(a.Address)
}
