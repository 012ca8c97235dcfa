package imageref

import (
	"errors"
	"testing"
)

func TestCheckRepository(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		repo string
		ok   bool
	}{
		{"acme/sandbox", true},
		{"library/ubuntu", true},
		{"a/b.c/d_e/f__g/h--i", true},
		{"../../etc/passwd", false},
		{"acme/../sandbox", false},
		{"acme/./sandbox", false},
		{"acme//sandbox", false},
		{"acme/sandbox/", false},
		{".hidden/x", false},
		{"acme/-x", false},
		{"Acme/x", false},
		{"", false},
	} {
		err := CheckRepository(tt.repo)
		if (err == nil) != tt.ok {
			t.Errorf("CheckRepository(%q) = %v, want ok=%v", tt.repo, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckRepository(%q) = %v, want ErrInvalid", tt.repo, err)
		}
	}
}

func TestCheckRegistryPattern(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		p  string
		ok bool
	}{
		{"registry.example.com", true},
		{"registry.example.com:5000", true},
		{"*.example.com", true},
		{"*.example.co.uk", true},
		{"s3.amazonaws.com", true}, // a private suffix, but one host
		{"registry.corp.internal", true},
		{"*.corp.internal", true},
		{"localhost:5000", true},
		{"*.co.uk", false},
		{"*.com", false},
		{"co.uk", false},
		{"com", false},
		{"*.azurecr.io", true}, // a private suffix: Microsoft's registries
		{"*.internal", false},
		{"*.gov.uk", false},
		{"", false},
		{"ghcr.io/acme", false},
		{"*.*.example.com", false},
		{"Registry.Example.com", false},
		{"..", false},
		{"a..b", false},
		{"-x.example.com", false},
	} {
		err := CheckRegistryPattern(tt.p)
		if (err == nil) != tt.ok {
			t.Errorf("CheckRegistryPattern(%q) = %v, want ok=%v", tt.p, err, tt.ok)
		}
	}
}

func TestCheckReference(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		ref string
		ok  bool
	}{
		{"ghcr.io/acme/sandbox:v1", true},
		{"agentd/runner-managed:codex-latest", true}, // a local image: registry implicit
		{"ubuntu", true},
		{"ghcr.io/../../etc/passwd:1", false},
		{"../x:1", false},
		{"acme/./x", false},
		{"ACME/x", false},
		{"", false},
	} {
		err := CheckReference(tt.ref)
		if (err == nil) != tt.ok {
			t.Errorf("CheckReference(%q) = %v, want ok=%v", tt.ref, err, tt.ok)
		}
	}
}
