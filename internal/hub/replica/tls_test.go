package replica_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"testing"

	"github.com/devdepot-ai/agentd/internal/hub/replica"
)

// handshake runs a TLS handshake between a client and a server config over
// a loopback TCP connection and returns both sides' errors.
func handshake(t *testing.T, client, server *tls.Config) (cerr, serr error) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	c, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := lis.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	done := make(chan error, 1)
	go func() {
		ts := tls.Server(s, server)
		err := ts.HandshakeContext(t.Context())
		if err == nil {
			// TLS 1.3: the server learns of a refused client certificate
			// only when it reads.
			_, err = ts.Read(make([]byte, 1))
		}
		s.Close()
		done <- err
	}()
	tc := tls.Client(c, client)
	cerr = tc.HandshakeContext(t.Context())
	if cerr == nil {
		_, cerr = tc.Write([]byte("x"))
	}
	c.Close()
	return cerr, <-done
}

func TestTLSConfigAdmitsOnlyReplicas(t *testing.T) {
	t.Parallel()
	config := func(seed byte) *tls.Config {
		cfg, err := replica.TLSConfig(bytes.Repeat([]byte{seed}, 32))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	same1, same2, other := config(1), config(1), config(2)
	if cerr, serr := handshake(t, same1, same2); cerr != nil || serr != nil {
		t.Errorf("two replicas of one hub: client %v, server %v; want a connection", cerr, serr)
	}
	if cerr, _ := handshake(t, other, same1); !errors.Is(cerr, replica.ErrNotReplica) {
		t.Errorf("client of another hub: %v, want it to refuse the server (%v)", cerr, replica.ErrNotReplica)
	}
	// A client with another key that does not check the server: the
	// server refuses it.
	rogue := other.Clone()
	rogue.VerifyPeerCertificate = nil
	if _, serr := handshake(t, rogue, same1); !errors.Is(serr, replica.ErrNotReplica) {
		t.Errorf("client with another key: server says %v, want it refused (%v)", serr, replica.ErrNotReplica)
	}
	if _, err := replica.TLSConfig([]byte("short")); err == nil {
		t.Error("TLSConfig took a 5-byte secret")
	}
}
