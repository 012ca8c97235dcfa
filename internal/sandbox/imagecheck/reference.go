package imagecheck

import (
	"fmt"
	"net/http"
	"strings"
	"unicode"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/devdepot-ai/agentd/internal/imageref"
	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// maxRefLen bounds a reference before it is parsed or echoed into a report;
// a registry's own limits (255 for the repository, 128 for a tag) are
// checked by the parser.
const maxRefLen = 512

// exampleRef is the shape of a reference the fixes point to.
const exampleRef = "docker.io/acme/sandbox:v1"

// defaultRegistries are the registries every hub pulls from. A pattern
// "*.example.com" matches every subdomain of example.com, not example.com.
var defaultRegistries = []string{
	"docker.io", "registry-1.docker.io", "index.docker.io",
	"ghcr.io",
	"gcr.io", "*.gcr.io",
	"*.pkg.dev",
	"*.azurecr.io",
	"public.ecr.aws",
	"quay.io",
}

// shownRegistries is defaultRegistries as a fix names them (no aliases).
const shownRegistries = "docker.io, ghcr.io, gcr.io, *.gcr.io, *.pkg.dev, *.azurecr.io, public.ecr.aws or quay.io"

// reference runs reference.syntax: a full reference (registry, namespace
// and tag explicit), so that what the hub pins is what the user meant.
func (r *run) reference(ref string) bool {
	fail := func(breaks, fix string) bool {
		r.add(IDReferenceSyntax, sandbox.Fail, breaks, fix)
		return false
	}
	switch {
	case strings.TrimSpace(ref) == "":
		return fail("there is no image to run: the reference is empty",
			"give the full reference, e.g. "+exampleRef)
	case len(ref) > maxRefLen:
		return fail(fmt.Sprintf("the reference is %d characters long, more than %d: no registry holds such a name", len(ref), maxRefLen),
			"give the full reference, e.g. "+exampleRef)
	case strings.ContainsFunc(ref, unicode.IsSpace):
		return fail(fmt.Sprintf("%q contains spaces, so it names no image", ref),
			"write it without spaces, e.g. "+exampleRef)
	}
	parsed, err := name.ParseReference(ref, name.StrictValidation)
	if err != nil {
		if full, missing, ok := complete(ref); ok {
			return fail(fmt.Sprintf("%s leaves %s implicit: the hub never guesses, since a guess can pull another image than the one you built", ref, joinAnd(missing)),
				"write "+full)
		}
		return fail(fmt.Sprintf("%q is not an image reference (%v): there is nothing to pull", ref, whyNot(ref, err)),
			"write it as REGISTRY/REPOSITORY:TAG in lowercase, e.g. "+exampleRef)
	}
	if err := imageref.CheckRepository(parsed.Context().RepositoryStr()); err != nil {
		return fail(fmt.Sprintf("%q is not an image reference (%v): there is nothing to pull", ref, err),
			"write it as REGISTRY/REPOSITORY:TAG in lowercase, e.g. "+exampleRef)
	}
	r.ref = parsed
	r.pass(IDReferenceSyntax)
	return true
}

// complete returns ref with what it leaves implicit made explicit, as
// Docker would resolve it, and what was implicit; false when ref is not a
// reference even with defaults, or leaves nothing implicit.
func complete(ref string) (full string, missing []string, ok bool) {
	if _, err := name.ParseReference(ref, name.WeakValidation); err != nil {
		return "", nil, false
	}
	rest, digest, _ := strings.Cut(ref, "@")
	repo, tag := rest, ""
	if i := strings.LastIndexByte(rest, ':'); i > strings.LastIndexByte(rest, '/') {
		repo, tag = rest[:i], rest[i+1:]
	}
	host, path, found := strings.Cut(repo, "/")
	if !found || (host != "localhost" && !strings.ContainsAny(host, ".:")) {
		missing = append(missing, "the registry")
		host, path = "docker.io", repo
	}
	if (host == "docker.io" || host == name.DefaultRegistry) && !strings.Contains(path, "/") {
		missing = append(missing, "the library/ namespace")
		path = "library/" + path
	}
	full = host + "/" + path
	if tag != "" {
		full += ":" + tag
	}
	switch {
	case digest != "":
		full += "@" + digest
	case tag == "":
		missing = append(missing, "the tag")
		full += ":latest"
	}
	if len(missing) == 0 {
		return "", nil, false
	}
	if _, err := name.ParseReference(full, name.StrictValidation); err != nil {
		return "", nil, false
	}
	return full, missing, true
}

// whyNot is why ref does not parse: the tag's or digest's own error,
// where the parser's says only "could not parse reference".
func whyNot(ref string, err error) error {
	var specific error
	if strings.Contains(ref, "@") {
		_, specific = name.NewDigest(ref, name.WeakValidation)
	} else {
		_, specific = name.NewTag(ref, name.WeakValidation)
	}
	if specific != nil {
		return specific
	}
	return err
}

// joinAnd joins "a", "b", "c" as "a, b and c".
func joinAnd(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// registry runs reference.registry: the hub pulls only from registries it
// allows, so a reference cannot point it at an arbitrary host.
func (r *run) registry() bool {
	host := r.ref.Context().RegistryStr()
	if !allowed(host, defaultRegistries) && !allowed(host, r.opts.AllowRegistries) {
		r.add(IDReferenceRegistry, sandbox.Fail,
			fmt.Sprintf("this hub does not pull from %s, so no sandbox can start from this image", host),
			fmt.Sprintf("push the image to %s; if you run the hub, allow the registry: --allow-registry %s on agenthub serve", shownRegistries, host))
		return false
	}
	if r.opts.Insecure != nil && r.opts.Insecure(host) {
		insecure, err := name.ParseReference(r.ref.String(), name.StrictValidation, name.Insecure)
		if err == nil {
			r.ref = insecure
		}
	}
	r.pass(IDReferenceRegistry)
	return true
}

// allowed reports whether host (with its port, if any) matches one of
// patterns: exactly, or "*.suffix" for any subdomain of suffix. Case is
// ignored.
func allowed(host string, patterns []string) bool {
	host = strings.ToLower(host)
	for _, p := range patterns {
		p = strings.ToLower(strings.TrimSpace(p))
		if suffix, ok := strings.CutPrefix(p, "*"); ok {
			if strings.HasPrefix(suffix, ".") && len(host) > len(suffix) && strings.HasSuffix(host, suffix) {
				return true
			}
			continue
		}
		if p != "" && host == p {
			return true
		}
	}
	return false
}

// httpsOnly refuses plain http to every host but those insecure allows:
// the name package would otherwise speak http to any loopback, RFC 1918
// or .local registry, including through redirects and token realms.
type httpsOnly struct {
	next     http.RoundTripper
	insecure func(host string) bool
}

var _ http.RoundTripper = httpsOnly{}

func (t httpsOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" && (t.insecure == nil || !t.insecure(req.URL.Host)) {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("%s to %s refused: only https", req.URL.Scheme, req.URL.Host)
	}
	return t.next.RoundTrip(req)
}
