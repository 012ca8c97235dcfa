package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"go.uber.org/zap/zaptest"
)

// Bad --insecure-registry and --registry-ca values are refused before the
// hub starts, naming the flag; good ones reach the image checks (the
// registry is allowed, plain http to it, 127.0.0.0/8 without a flag).
func TestRegistryFlags(t *testing.T) {
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--insecure-registry", "http://registry.internal:5000"}, "--insecure-registry"},
		{[]string{"--insecure-registry", "*.internal"}, "--insecure-registry"},
		{[]string{"--registry-ca", filepath.Join(t.TempDir(), "missing.pem")}, "--registry-ca"},
		{[]string{"--registry-ca", notPEM}, "no PEM certificate in it"},
	} {
		var f sandboxFlags
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		f.register(fs)
		if err := fs.Parse(append([]string{"--sandboxes", "on"}, tc.args...)); err != nil {
			t.Fatal(err)
		}
		_, closeFn, err := f.options(t.Context(), t.TempDir()+"/hub.db", zaptest.NewLogger(t))
		closeFn()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want an error with %q", tc.args, err, tc.want)
		}
	}
	var f sandboxFlags
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse([]string{"--insecure-registry", "registry.internal:5000"}); err != nil {
		t.Fatal(err)
	}
	r, err := f.registries()
	if err != nil || !r.IsInsecure("registry.internal:5000") || !r.IsInsecure("127.0.0.1:5000") || r.IsInsecure("registry.internal:5001") {
		t.Errorf("registries() = %+v, %v", r, err)
	}
}
