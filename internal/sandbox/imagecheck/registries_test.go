package imagecheck

import (
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/testca"
)

// Registries as admins run them, each served in process on loopback: a
// plain-http one on 127.0.0.1 (insecure without a flag, as Docker's
// 127.0.0.0/8), the same as localhost (a name: plain http only with
// --insecure-registry), and one behind TLS with its own CA (only with
// --registry-ca). Without the flag each fails naming it.
func TestRegistries(t *testing.T) {
	t.Parallel()
	plain := newTestRegistry(t)
	port := plain.host[strings.LastIndex(plain.host, ":")+1:]
	ca := testca.New(t)
	tlsSrv := httptest.NewUnstartedServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	tlsSrv.TLS = ca.Server
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0)
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	tlsAddr := tlsSrv.Listener.Addr().String()
	tlsHost := "localhost:" + tlsAddr[strings.LastIndex(tlsAddr, ":")+1:]
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cas, err := LoadCAs(caFile)
	if err != nil {
		t.Fatal(err)
	}

	img := testImage(t, "amd64", baseLabels)
	plainRef := plain.push(t, "team/tool:1", img)
	localRef := "localhost:" + port + "/team/tool:1"
	tlsRef := tlsHost + "/team/tool:1"
	r, err := name.ParseReference(tlsRef)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img, remote.WithTransport(Registries{CAs: ca.Pool}.Transport())); err != nil {
		t.Fatalf("push over TLS: %v", err)
	}

	for _, tc := range []struct {
		name string
		ref  string
		reg  Registries
		fix  string // "": passes
	}{
		{"127.0.0.1 without flags", plainRef, Registries{}, ""},
		{"localhost without --insecure-registry", localRef, Registries{}, "--insecure-registry localhost:" + port + " on agenthub serve"},
		{"localhost with --insecure-registry", localRef, Registries{Insecure: []string{"localhost:" + port}}, ""},
		{"private CA without --registry-ca", tlsRef, Registries{}, "give the hub that CA with --registry-ca FILE on agenthub serve"},
		{"private CA with --registry-ca", tlsRef, Registries{CAs: cas, CAFile: caFile}, ""},
		{"another registry's --insecure-registry", localRef, Registries{Insecure: []string{"localhost:1"}}, "--insecure-registry localhost:" + port},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			host := tc.ref[:strings.Index(tc.ref, "/")]
			opts := Options{AllowRegistries: []string{host}, BaseBuild: "b2"}
			tc.reg.Apply(&opts)
			res, err := Run(t.Context(), tc.ref, opts)
			if err != nil {
				t.Fatal(err)
			}
			if tc.fix == "" {
				if res.Report.Failed() || !strings.HasPrefix(res.Digest, host+"/team/tool@sha256:") {
					t.Errorf("Run = %+v, digest %q; want a pass", res.Report, res.Digest)
				}
				return
			}
			var failed *sandbox.Check
			for i := range res.Report {
				if res.Report[i].Status == sandbox.Fail {
					failed = &res.Report[i]
				}
			}
			if failed == nil || !strings.Contains(failed.Fix, tc.fix) {
				t.Errorf("Run = %+v; want a failed check whose fix names %q", res.Report, tc.fix)
			}
		})
	}
}

func TestCheckInsecureRegistry(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"registry.internal:5000", "localhost:5000", "10.0.0.5:5000", "registry.internal"} {
		if err := CheckInsecureRegistry(ok); err != nil {
			t.Errorf("CheckInsecureRegistry(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "*.example.com", "http://registry.internal", "registry.internal/path"} {
		if err := CheckInsecureRegistry(bad); err == nil {
			t.Errorf("CheckInsecureRegistry(%q) = nil, want an error", bad)
		}
	}
	if r := (Registries{}); !r.IsInsecure("127.0.0.1:5000") || !r.IsInsecure("127.5.0.1") || !r.IsInsecure("[::1]:5000") || r.IsInsecure("localhost:5000") || r.IsInsecure("10.0.0.1:5000") {
		t.Error("IsInsecure without flags: want 127.0.0.0/8 and ::1 only")
	}
}
