package imagecheck

import "testing"

func TestAllowed(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		host string
		want bool
	}{
		{"index.docker.io", true}, {"registry-1.docker.io", true}, {"ghcr.io", true}, {"GHCR.io", true},
		{"gcr.io", true}, {"us.gcr.io", true}, {"mirror.gcr.io", true}, {"europe-west1-docker.pkg.dev", true},
		{"acme.azurecr.io", true}, {"public.ecr.aws", true}, {"quay.io", true},
		{"pkg.dev", false}, {"azurecr.io", false}, {"evilgcr.io", false}, {"ghcr.io.evil.com", false},
		{"ghcr.io:8443", false}, {"docker.io.evil.com", false}, {"127.0.0.1:5000", false},
	} {
		if got := allowed(tt.host, defaultRegistries); got != tt.want {
			t.Errorf("allowed(%q) = %v, want %v", tt.host, got, tt.want)
		}
	}
}
