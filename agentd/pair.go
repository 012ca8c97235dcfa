package agentd

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/devdepot-ai/agentd/internal/config"
	"github.com/devdepot-ai/agentd/internal/version"
	"github.com/devdepot-ai/agentd/internal/wire"
)

// PairOptions says which hub to pair with and how.
type PairOptions struct {
	Hub       string // hub URL: https://… (or http:// to loopback)
	Code      string // pairing code from the admin, XXXX-XXXX
	Name      string // name shown in `agentctl machines` (default: hostname)
	ConfigDir string // where the pairing and key are stored
	CAFile    string // PEM file of the CA that signed the hub's certificate (default: system roots)
}

// Pair registers this machine with a hub: it makes a key pair, sends the
// public half with the pairing code, and stores the machine id and the key
// in the config dir (0600 files in a 0700 dir). It refuses to replace an
// existing pairing (run Unpair first).
func Pair(ctx context.Context, o PairOptions) (Machine, error) {
	if _, _, err := config.LoadMachine(o.ConfigDir); err == nil {
		return Machine{}, fmt.Errorf("this machine is already paired (%s); run 'agentd unpair' first", o.ConfigDir)
	} else if !errors.Is(err, config.ErrNotPaired) {
		var pe *config.PermissionError
		if errors.As(err, &pe) {
			return Machine{}, err
		}
	}
	u, err := hubURL(o.Hub)
	if err != nil {
		return Machine{}, err
	}
	client, err := httpClient(o.CAFile)
	if err != nil {
		return Machine{}, err
	}
	key, err := config.NewKey()
	if err != nil {
		return Machine{}, err
	}
	host, _ := os.Hostname()
	body, _ := json.Marshal(wire.PairRequest{
		Code: o.Code, PublicKey: key.Public().(ed25519.PublicKey), Hostname: host,
		OS: runtime.GOOS, Arch: runtime.GOARCH, Name: o.Name, Version: version.Version,
	})
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.JoinPath(wire.PairPath).String(), bytes.NewReader(body))
	if err != nil {
		return Machine{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "agentd/"+version.Version)
	resp, err := client.Do(req)
	if err != nil {
		return Machine{}, fmt.Errorf("reach hub %s: %w", u.Host, err)
	}
	defer resp.Body.Close()
	// One decode for either answer: a PairResponse (200) or a PairError.
	var pr struct {
		wire.PairResponse
		wire.PairError
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err := json.Unmarshal(data, &pr); err != nil {
		return Machine{}, fmt.Errorf("hub answered %s, not a pairing response: %.200q", resp.Status, data)
	}
	if resp.StatusCode != http.StatusOK {
		if pr.Error == "" {
			pr.Error = resp.Status
		}
		return Machine{}, fmt.Errorf("pairing refused: %s", pr.Error)
	}
	m := config.Machine{Hub: u.String(), MachineID: pr.MachineID, Org: pr.Org, Name: o.Name, CAFile: o.CAFile}
	if m.Name == "" {
		m.Name = host
	}
	if err := config.SaveMachine(o.ConfigDir, m, key); err != nil {
		return Machine{}, fmt.Errorf("paired as %s, but storing the key failed (pair again with a new code): %w", pr.MachineID, err)
	}
	return Machine(m), nil
}

// Machine is a pairing as Pair stored it.
type Machine struct {
	Hub       string // the hub's URL
	MachineID string // the id the hub assigned
	Org       string // the org the machine was paired into
	Name      string // the name shown in `agentctl machines`
	CAFile    string // the CA file the hub's certificate is checked with ("" for the system roots)
}

// hubURL checks a hub URL: https, or http only to a loopback host.
func hubURL(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(s, "/"))
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("hub %q: want https://host[:port]", s)
	}
	switch u.Scheme {
	case "https":
	case "http":
		h := u.Hostname()
		if h != "localhost" && !strings.HasPrefix(h, "127.") && h != "::1" {
			return nil, fmt.Errorf("hub %q: plain http is only for a hub on this machine; use https://", s)
		}
	default:
		return nil, fmt.Errorf("hub %q: scheme must be https (or http to loopback)", s)
	}
	return u, nil
}

func caPool(caFile string) (*x509.CertPool, error) {
	if caFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA file %s holds no PEM certificate", caFile)
	}
	return pool, nil
}

func httpClient(caFile string) (*http.Client, error) {
	pool, err := caPool(caFile)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}, nil
}
