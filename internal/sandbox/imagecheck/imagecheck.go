package imagecheck

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// Check IDs, in the order the checks run. They are stable: reports are
// stored and clients may match on them.
const (
	IDReferenceSyntax   = "reference.syntax"
	IDReferenceRegistry = "reference.registry"
	IDPullAnonymous     = "pull.anonymous"
	IDPlatform          = "platform.amd64"
	IDSize              = "size.compressed"
	IDBaseMarker        = "base.marker"
	IDBaseBuild         = "base.build" // only when Options.BaseBuild is set
)

// titles say what each check checks, one line.
var titles = map[string]string{
	IDReferenceSyntax:   "the image reference is complete and valid",
	IDReferenceRegistry: "the registry is one this hub pulls from",
	IDPullAnonymous:     "the image can be pulled without credentials",
	IDPlatform:          "the image runs on linux/amd64",
	IDSize:              "the image is within the size limit",
	IDBaseMarker:        "the image is built on the sandbox base",
	IDBaseBuild:         "the image is built on the current base build",
}

// DefaultMaxCompressedBytes is the compressed size limit when none is
// configured, and the most a configured limit can be.
const DefaultMaxCompressedBytes int64 = 5_000_000_000

// maxConfigBytes bounds the config blob read into memory; real configs are
// kilobytes.
const maxConfigBytes = 8 << 20

// Options configure Run. The zero value checks against the default
// registries and limit, over remote.DefaultTransport, https only.
type Options struct {
	// AllowRegistries are registries allowed besides the defaults (Docker
	// Hub, ghcr.io, gcr.io and *.gcr.io, *.pkg.dev, *.azurecr.io,
	// public.ecr.aws, quay.io): "host[:port]" exactly, or "*.example.com"
	// for every subdomain of example.com. Case is ignored.
	AllowRegistries []string
	// MaxCompressedBytes is the most the linux/amd64 image may weigh
	// compressed (layers and config, as the manifest says). Zero or less
	// means DefaultMaxCompressedBytes; more than that is clamped to it.
	MaxCompressedBytes int64
	// BaseBuild is the current sandbox base image's build id; an image
	// built on another is warned about. Empty: not checked.
	BaseBuild string
	// Insecure reports the registries (host[:port]) spoken to in plain
	// http (tests with an in-process registry). Nil: none.
	Insecure func(host string) bool
	// Transport carries the registry requests. Nil: remote.DefaultTransport.
	Transport http.RoundTripper
}

// Result is what Run learned about an image.
type Result struct {
	// Report has one line per check that ran, in order; the image may be
	// pinned only when !Report.Failed().
	Report sandbox.Report
	// Digest is the linux/amd64 image manifest's repo@sha256:… (registry
	// host included), what the hub pulls and pins. Set once the platform
	// check passed, even if a later check failed.
	Digest string
	// CompressedBytes is the linux/amd64 image's compressed size (layers
	// and config, as its manifest says); set with Digest.
	CompressedBytes int64
	// Labels are the linux/amd64 image config's labels; set with Digest.
	Labels map[string]string
	// Config is the linux/amd64 image's config; set with Digest.
	Config *v1.ConfigFile
}

// Run checks the image ref names, reading only the registry (manifest,
// index, config; never a layer), and stops at the first failed check the
// later ones depend on. Every problem with the image or the reference is a
// failed check in the Result; the error is for Run's own faults (ctx
// cancelled or expired). Bound the time it may take with ctx.
func Run(ctx context.Context, ref string, opts Options) (Result, error) {
	r := &run{ctx: ctx, opts: opts}
	if !r.reference(ref) || !r.registry() {
		return r.res, nil
	}
	next := r.opts.Transport
	if next == nil {
		next = remote.DefaultTransport
	}
	r.remote = []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuth(authn.Anonymous),
		remote.WithTransport(httpsOnly{next: next, insecure: r.opts.Insecure}),
		remote.WithUserAgent("agentd-imagecheck"),
	}
	for _, step := range []func() (bool, error){r.pull, r.platform, r.size} {
		ok, err := step()
		if err != nil {
			return Result{}, err
		}
		if !ok {
			return r.res, nil
		}
	}
	r.base()
	return r.res, nil
}

// run is the state of one Run, filled in as the checks pass.
type run struct {
	ctx    context.Context
	opts   Options
	remote []remote.Option
	res    Result

	ref      name.Reference     // after reference.syntax
	desc     *remote.Descriptor // after pull.anonymous
	manifest *v1.Manifest       // after platform.amd64
}

func (r *run) add(id string, status sandbox.CheckStatus, breaks, fix string) {
	r.res.Report = append(r.res.Report, sandbox.Check{ID: id, Status: status, Title: titles[id], Breaks: breaks, Fix: fix})
}

func (r *run) pass(id string) { r.add(id, sandbox.Pass, "", "") }

// pull runs pull.anonymous: sandbox hosts pull without credentials, so
// this fetch does too.
func (r *run) pull() (bool, error) {
	desc, err := remote.Get(r.ref, r.remote...)
	if err != nil {
		return false, r.fetchFailed(IDPullAnonymous, err)
	}
	if !desc.MediaType.IsIndex() && !desc.MediaType.IsImage() {
		r.add(IDPullAnonymous, sandbox.Fail,
			fmt.Sprintf("%s is a %q manifest, not an image Docker pulls (schema 1 is no longer supported): no sandbox can start from it", refName(r.ref), desc.MediaType),
			"rebuild and push it with a current Docker: "+buildCmd(r.ref))
		return false, nil
	}
	r.desc = desc
	r.pass(IDPullAnonymous)
	return true, nil
}

// platform runs platform.amd64: the linux/amd64 image, found through an
// index or alone, and its config saying so (an index entry or a
// single-platform manifest can claim what the config denies).
func (r *run) platform() (bool, error) {
	var img v1.Image
	digest := r.desc.Digest
	if r.desc.MediaType.IsIndex() {
		idx, err := r.desc.ImageIndex()
		if err != nil {
			return false, r.fetchFailed(IDPlatform, err)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			return false, r.fetchFailed(IDPlatform, err)
		}
		child, ok := amd64Child(im)
		if !ok {
			r.add(IDPlatform, sandbox.Fail,
				fmt.Sprintf("the image has no linux/amd64 variant (it has %s): sandboxes run on linux/amd64, so the container could not start", platforms(im)),
				"build for linux/amd64 and push: "+buildCmd(r.ref))
			return false, nil
		}
		if img, err = idx.Image(child.Digest); err != nil {
			return false, r.fetchFailed(IDPlatform, err)
		}
		digest = child.Digest
	} else {
		var err error
		if img, err = r.desc.Image(); err != nil {
			return false, r.fetchFailed(IDPlatform, err)
		}
	}
	m, err := img.Manifest()
	if err != nil {
		return false, r.fetchFailed(IDPlatform, err)
	}
	if m.Config.Size > maxConfigBytes {
		r.add(IDPlatform, sandbox.Fail,
			fmt.Sprintf("the image config is %s, more than %s: not a config a build makes, and the hub does not read it", human(m.Config.Size), human(maxConfigBytes)),
			"rebuild and push it: "+buildCmd(r.ref))
		return false, nil
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return false, r.fetchFailed(IDPlatform, err)
	}
	if cfg.OS != "linux" || cfg.Architecture != "amd64" {
		r.add(IDPlatform, sandbox.Fail,
			fmt.Sprintf("the image is built for %s (its config says so): on the linux/amd64 hosts sandboxes run on, its programs fail with \"exec format error\"", platformOf(cfg)),
			"build for linux/amd64 and push: "+buildCmd(r.ref))
		return false, nil
	}
	r.manifest = m
	r.res.Digest = repoName(r.ref) + "@" + digest.String()
	r.res.Config = cfg
	r.res.Labels = cfg.Config.Labels
	r.pass(IDPlatform)
	return true, nil
}

// amd64Child is the index's linux/amd64 image manifest, if any.
func amd64Child(im *v1.IndexManifest) (v1.Descriptor, bool) {
	for _, d := range im.Manifests {
		if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == "amd64" && d.MediaType.IsImage() {
			return d, true
		}
	}
	return v1.Descriptor{}, false
}

// platforms lists the index's platforms, attestations ("unknown/unknown")
// left out.
func platforms(im *v1.IndexManifest) string {
	var out []string
	seen := map[string]bool{}
	for _, d := range im.Manifests {
		if d.Platform == nil || d.Platform.OS == "unknown" {
			continue
		}
		p := d.Platform.OS + "/" + d.Platform.Architecture
		if d.Platform.Variant != "" {
			p += "/" + d.Platform.Variant
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return "no platform"
	}
	return strings.Join(out, ", ")
}

// platformOf is the config's os/arch[/variant].
func platformOf(cfg *v1.ConfigFile) string {
	p := cmp.Or(cfg.OS, "?") + "/" + cmp.Or(cfg.Architecture, "?")
	if cfg.Variant != "" {
		p += "/" + cfg.Variant
	}
	return p
}

// size runs size.compressed. It does not stop the checks: the base check
// is worth reporting with it.
func (r *run) size() (bool, error) {
	limit := r.opts.MaxCompressedBytes
	if limit <= 0 || limit > DefaultMaxCompressedBytes {
		limit = DefaultMaxCompressedBytes
	}
	var total int64
	for _, d := range append([]v1.Descriptor{r.manifest.Config}, r.manifest.Layers...) {
		if d.Size < 0 {
			r.add(IDSize, sandbox.Fail,
				"the manifest lists a negative size: it is corrupt, and Docker would refuse to pull it",
				"rebuild and push it: "+buildCmd(r.ref))
			return true, nil
		}
		if d.Size > math.MaxInt64-total {
			total = math.MaxInt64
		} else {
			total += d.Size
		}
	}
	r.res.CompressedBytes = total
	if total > limit {
		size, most := human(total), human(limit)
		if size == most {
			size = fmt.Sprintf("%s (%d bytes)", size, total)
		}
		r.add(IDSize, sandbox.Fail,
			fmt.Sprintf("the image is %s compressed, over this hub's limit of %s: the hub will not pull it, so no sandbox can start", size, most),
			"make it smaller: a multi-stage build, fewer tools, package caches removed in the RUN that made them (rm -rf /var/lib/apt/lists/*, pip --no-cache-dir)")
		return true, nil
	}
	r.pass(IDSize)
	return true, nil
}

// base runs base.marker and, when the current build is known, base.build.
func (r *run) base() {
	const fix = "build FROM " + sandbox.BaseImage
	switch contract := r.res.Labels[sandbox.LabelBaseMarker]; contract {
	case sandbox.BaseContract:
		r.pass(IDBaseMarker)
	case "":
		r.add(IDBaseMarker, sandbox.Fail,
			fmt.Sprintf("the image is not built on the sandbox base: agentd's contract (user 1000, %s, the tools an agent expects) is only guaranteed on the base, so the agent's commands may run as the wrong user, without a workspace or without the tools they call", sandbox.WorkspaceDir),
			fix)
		return
	default:
		r.add(IDBaseMarker, sandbox.Fail,
			fmt.Sprintf("the image is built on sandbox base contract %q, and this hub runs contract %q: the user, directories and tools agentd expects may be missing or elsewhere", contract, sandbox.BaseContract),
			fix)
		return
	}
	if r.opts.BaseBuild == "" {
		return
	}
	build := r.res.Labels[sandbox.LabelBaseBuild]
	if build == r.opts.BaseBuild {
		r.pass(IDBaseBuild)
		return
	}
	r.add(IDBaseBuild, sandbox.Warn,
		fmt.Sprintf("built on an older base build %s (current %s): the agent misses the fixes made to the base since", cmp.Or(build, "(none)"), r.opts.BaseBuild),
		"rebuild to get fixes: docker build --pull (FROM "+sandbox.BaseImage+")")
}

// fetchFailed turns a registry error into a failed check id, or returns
// the error when it is Run's own (ctx done).
func (r *run) fetchFailed(id string, err error) error {
	if ctxErr := r.ctx.Err(); ctxErr != nil {
		return fmt.Errorf("check image %s: %w", refName(r.ref), ctxErr)
	}
	host, repo := r.ref.Context().RegistryStr(), repoName(r.ref)
	revalidate := "try again later: agentctl env revalidate NAME"
	var terr *transport.Error
	var nerr net.Error
	var uerr *url.Error
	switch {
	case errors.As(err, &terr) && denied(terr):
		r.add(id, sandbox.Fail,
			fmt.Sprintf("the image must be public: sandboxes pull it without credentials, and %s refused an anonymous pull of %s (%d %s)", host, repo, terr.StatusCode, http.StatusText(terr.StatusCode)),
			fmt.Sprintf("make %s public, or check its name: for a repository that does not exist some registries answer the same", repo))
	case errors.As(err, &terr) && unknown(terr):
		r.add(id, sandbox.Fail,
			fmt.Sprintf("no such image or tag: %s has no %s, so there is nothing to start a sandbox from", host, refName(r.ref)),
			"check the repository and tag, or push the image: docker push "+refName(r.ref))
	case errors.As(err, &terr):
		r.add(id, sandbox.Fail,
			fmt.Sprintf("%s answered %d %s: the image could not be read, so it cannot be checked or pulled (%v)", host, terr.StatusCode, http.StatusText(terr.StatusCode), err),
			revalidate)
	case registryHint(host, err) != "":
		r.add(id, sandbox.Fail,
			fmt.Sprintf("the registry %s could not be read, so the image cannot be checked or pulled (%v)", host, err),
			registryHint(host, err))
	case errors.As(err, &nerr) || errors.As(err, &uerr):
		r.add(id, sandbox.Fail,
			fmt.Sprintf("the registry %s could not be reached, so the image cannot be checked or pulled (%v)", host, err),
			"check the registry's host name; if it was down, "+revalidate)
	default:
		r.add(id, sandbox.Fail,
			fmt.Sprintf("%s sent something that is not a readable image (%v): Docker would fail to pull it too", host, err),
			"push it again; if that does not help, rebuild it with a current Docker: "+buildCmd(r.ref))
	}
	return nil
}

// denied: the registry wants credentials (or refuses these).
func denied(e *transport.Error) bool {
	if e.StatusCode == http.StatusUnauthorized || e.StatusCode == http.StatusForbidden {
		return true
	}
	return hasCode(e, transport.UnauthorizedErrorCode, transport.DeniedErrorCode)
}

// unknown: no such repository, tag or digest.
func unknown(e *transport.Error) bool {
	return e.StatusCode == http.StatusNotFound ||
		hasCode(e, transport.NameUnknownErrorCode, transport.ManifestUnknownErrorCode, transport.BlobUnknownErrorCode)
}

func hasCode(e *transport.Error, codes ...transport.ErrorCode) bool {
	for _, d := range e.Errors {
		for _, c := range codes {
			if d.Code == c {
				return true
			}
		}
	}
	return false
}

// repoName is the host-qualified repository, Docker Hub as docker.io.
func repoName(ref name.Reference) string {
	repo := ref.Context()
	if repo.RegistryStr() == name.DefaultRegistry {
		return "docker.io/" + repo.RepositoryStr()
	}
	return repo.Name()
}

// refName is ref as the user would write it, Docker Hub as docker.io.
func refName(ref name.Reference) string {
	sep := ":"
	if _, ok := ref.(name.Digest); ok {
		sep = "@"
	}
	return repoName(ref) + sep + ref.Identifier()
}

// buildCmd is the command that builds and pushes ref for linux/amd64.
func buildCmd(ref name.Reference) string {
	return "docker buildx build --platform linux/amd64 -t " + refName(ref) + " --push ."
}

// human is n bytes in decimal units, as Docker shows sizes: "6.2 GB".
func human(n int64) string {
	if n < 1000 {
		return strconv.FormatInt(n, 10) + " B"
	}
	f, unit := float64(n), ""
	for _, u := range []string{"kB", "MB", "GB", "TB", "PB", "EB"} {
		if f < 1000 {
			break
		}
		f, unit = f/1000, u
	}
	s := strings.TrimRight(strings.TrimRight(strconv.FormatFloat(f, 'f', 2, 64), "0"), ".")
	return s + " " + unit
}
