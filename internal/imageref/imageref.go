// Package imageref holds the checks of container image references that the
// reference parser (go-containerregistry's name package) leaves out, shared
// by every place a reference or registry comes in: env create --image,
// agent run --image, agent profiles, and agenthub serve --allow-registry.
package imageref

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/devdepot-ai/agentd/internal/allowlist"
)

// ErrInvalid: a repository path or registry pattern is malformed.
var ErrInvalid = errors.New("invalid image reference")

// componentRE is one path component of a repository as the distribution
// spec's grammar has it: lowercase alphanumerics, separated by '.', '_',
// '__' or dashes; never empty, never only dots ("..", ".").
var componentRE = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$`)

// CheckRepository checks a repository path (the part after the registry
// host, without tag or digest), component by component: name's parser
// accepts "../../etc/passwd", which no registry serves and which would be
// joined into URLs and paths as a traversal.
func CheckRepository(repo string) error {
	if repo == "" {
		return fmt.Errorf("%w: the repository path is empty", ErrInvalid)
	}
	for c := range strings.SplitSeq(repo, "/") {
		if !componentRE.MatchString(c) {
			return fmt.Errorf("%w: repository path component %q: want lowercase letters and digits separated by '.', '_', '__' or '-' (no empty, '.' or '..' components)", ErrInvalid, c)
		}
	}
	return nil
}

// CheckRegistryPattern checks one --allow-registry entry: a registry host
// (with an optional port), or "*.domain" for every subdomain of domain.
// A wildcard over a public suffix ("*.co.uk", "*.com") and a public suffix
// itself ("co.uk") are refused: they would allow registries anyone can
// register (see allowlist.CheckNotPublicSuffix).
func CheckRegistryPattern(p string) error {
	host, wildcard := strings.CutPrefix(p, "*.")
	h := host
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		h = h[:i]
	}
	switch {
	case p == "":
		return fmt.Errorf("%w: empty registry", ErrInvalid)
	case strings.ContainsAny(p, "/@ ") || strings.Contains(host, "*"):
		return fmt.Errorf("%w: registry %q: want a host (registry.example.com, registry.example.com:5000) or *.example.com", ErrInvalid, p)
	case h == "" || h != strings.ToLower(h) || !hostRE.MatchString(host):
		return fmt.Errorf("%w: registry %q: want a lowercase host name", ErrInvalid, p)
	}
	if err := allowlist.CheckNotPublicSuffix(h, wildcard); err != nil {
		return fmt.Errorf("%w: registry %w", ErrInvalid, err)
	}
	return nil
}

// CheckReference checks a reference as the engine is asked for it (agent
// run --image names a local image, so the registry and tag may be
// implicit): it must parse, and its repository path must pass
// CheckRepository.
func CheckReference(ref string) error {
	parsed, err := name.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("%w %q: %v", ErrInvalid, ref, err)
	}
	if reg := parsed.Context().RegistryStr(); !hostRE.MatchString(reg) {
		return fmt.Errorf("%w %q: registry %q is not a host name", ErrInvalid, ref, reg)
	}
	if err := CheckRepository(parsed.Context().RepositoryStr()); err != nil {
		return fmt.Errorf("%q: %w", ref, err)
	}
	return nil
}

// hostRE is a registry host as the distribution grammar has it: labels of
// letters, digits and inner hyphens, an optional port.
var hostRE = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?$`)
