//go:build linux

package hub_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/transport"
)

// startTCPSandboxHub is the fake driver's hub whose sandboxes dial its TLS
// listener on loopback instead of its unix socket.
func startTCPSandboxHub(t *testing.T) (*fakeSandboxHub, sandboxes.Options) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var opts sandboxes.Options
	f := startFakeSandboxHub(t, func(o *sandboxes.Options) {
		o.KeyDir = t.TempDir()
		o.TunnelCADir = t.TempDir()
		o.TunnelListener, o.TunnelDial = lis, true
		opts = *o
	})
	return f, opts
}

// The sandboxes' tunnel over TCP: a sandbox started with TunnelDial gets
// wss://the listener and the tunnel's CA beside its key (no socket), and
// its agentd answers through that tunnel; the CA the hub made is on disk.
func TestSandboxTunnelOverTCP(t *testing.T) {
	f, o := startTCPSandboxHub(t)
	id, err := f.info("c-tcp")
	if err != nil {
		t.Fatalf("a call through the sandbox's TCP tunnel: %v", err)
	}
	ca, err := os.ReadFile(filepath.Join(o.TunnelCADir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	given, err := os.ReadFile(filepath.Join(o.KeyDir, id, "mnt", "hub-ca.pem"))
	if err != nil || string(given) != string(ca) {
		t.Errorf("the CA beside the sandbox's key: %q, %v; want the hub's tunnel CA", given, err)
	}
	// Its key was read (and removed) from the key mount: agentd came up
	// with it over the TCP tunnel, not with anything else.
	if _, err := os.Stat(filepath.Join(o.KeyDir, id, "mnt", "key")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the key in the key mount after start: %v; want it removed by agentd", err)
	}
}

// On the TCP listener, as on the socket, only sandboxes are admitted, each
// with its own key: a sandbox's key for another sandbox's id is refused, a
// machine's id is refused (its place is the public port), and a sandbox's
// key stays useless on the hub's public port; the real sandboxes keep
// answering.
func TestSandboxTunnelTCPRefusals(t *testing.T) {
	f, o := startTCPSandboxHub(t)
	a, err := f.info("c-a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.info("c-b")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(o.KeyDir, a, "seed"))
	if err != nil {
		t.Fatal(err)
	}
	seed, err := base64.StdEncoding.DecodeString(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	keyA := ed25519.NewKeyFromSeed(seed)
	pool := x509.NewCertPool()
	ca, err := os.ReadFile(filepath.Join(o.TunnelCADir, "ca.pem"))
	if err != nil || !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("the tunnel CA: %v", err)
	}
	pub, machineKey, _ := ed25519.GenerateKey(rand.Reader)
	m, err := f.h.Store.CreateMachine(t.Context(), store.Machine{OrgID: f.h.Org.ID, Name: "box", PublicKey: pub, CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	tcpURL := "wss://" + o.TunnelListener.Addr().String()
	for _, tc := range []struct {
		name, url, id string
		key           ed25519.PrivateKey
		want          error
	}{
		{"sandbox a's key as sandbox b", tcpURL, b, keyA, nil},
		{"a machine on the sandboxes' listener", tcpURL, m.ID, machineKey, transport.ErrWrongEndpoint},
		{"sandbox a's key on the public port", f.h.URL, a, keyA, transport.ErrWrongEndpoint},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tunnelVerdict(t, transport.Options{HubURL: tc.url, MachineID: tc.id, Key: tc.key, RootCAs: pool})
			var rej *transport.RejectedError
			if !errors.As(err, &rej) {
				t.Fatalf("tunnel: %v; want refused", err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("refused with %v; want %v", err, tc.want)
			}
		})
	}
	for conv, want := range map[string]string{"c-a": a, "c-b": b} {
		if got, err := f.info(conv); err != nil || got != want {
			t.Errorf("after the refusals, %s answered by %q (%v); want %s", conv, got, err, want)
		}
	}
}

// tunnelVerdict dials a tunnel with o and returns nil once it is up, the
// refusal once the hub refuses it, or the last error after 20 s.
func tunnelVerdict(t *testing.T, o transport.Options) error {
	t.Helper()
	tun, err := transport.Listen(o)
	if err != nil {
		return err
	}
	accepted := make(chan struct{})
	go func() { // Accept dials; Close ends it
		defer close(accepted)
		if c, err := tun.Accept(); err == nil {
			c.Close()
		}
	}()
	defer func() {
		tun.Close()
		<-accepted
	}()
	deadline := time.After(20 * time.Second)
	for {
		st := tun.Status()
		switch st.State {
		case transport.StateConnected:
			return nil
		case transport.StateRejected:
			return st.Err
		}
		select {
		case <-tun.Updated():
		case <-deadline:
			return errors.New("no verdict in 20 s: " + string(st.State) + ": " + errString(st.Err))
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
