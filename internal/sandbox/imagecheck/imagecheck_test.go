package imagecheck

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

func passes(ids ...string) sandbox.Report {
	var r sandbox.Report
	for _, id := range ids {
		r = append(r, sandbox.Check{ID: id, Status: sandbox.Pass, Title: titles[id]})
	}
	return r
}

func with(r sandbox.Report, id string, status sandbox.CheckStatus, breaks, fix string) sandbox.Report {
	return append(r, sandbox.Check{ID: id, Status: status, Title: titles[id], Breaks: breaks, Fix: fix})
}

const (
	wantBaseFix   = "build FROM ghcr.io/devdepot-ai/sandbox-base:1"
	wantAllowList = "docker.io, ghcr.io, gcr.io, *.gcr.io, *.pkg.dev, *.azurecr.io, public.ecr.aws or quay.io"
)

var upToPull = []string{IDReferenceSyntax, IDReferenceRegistry, IDPullAnonymous}

func TestRun(t *testing.T) {
	t.Parallel()
	reg := newTestRegistry(t)
	h := reg.host

	tests := []struct {
		name string
		// setup pushes what the case needs; it returns the reference to
		// check, the options, and the Report and Digest wanted.
		setup func(t *testing.T) (ref string, opts Options, want sandbox.Report, digest string)
	}{{
		name: "good image",
		setup: func(t *testing.T) (string, Options, sandbox.Report, string) {
			img := testImage(t, "amd64", baseLabels)
			ref := reg.push(t, "good/sandbox:v1", img)
			return ref, reg.options(), passes(append(upToPull, IDPlatform, IDSize, IDBaseMarker, IDBaseBuild)...),
				h + "/good/sandbox@" + digestOf(t, img)
		},
	}, {
		name: "no base marker",
		setup: func(t *testing.T) (string, Options, sandbox.Report, string) {
			img := testImage(t, "amd64", map[string]string{"org.opencontainers.image.title": "x"})
			ref := reg.push(t, "nomarker/sandbox:v1", img)
			return ref, reg.options(), with(passes(append(upToPull, IDPlatform, IDSize)...), IDBaseMarker, sandbox.Fail,
				"the image is not built on the sandbox base: agentd's contract (user 1000, /workspace, the tools an agent expects) is only guaranteed on the base, so the agent's commands may run as the wrong user, without a workspace or without the tools they call",
				wantBaseFix), h + "/nomarker/sandbox@" + digestOf(t, img)
		},
	}, {
		name: "wrong contract",
		setup: func(t *testing.T) (string, Options, sandbox.Report, string) {
			img := testImage(t, "amd64", map[string]string{sandbox.LabelBaseMarker: "2"})
			ref := reg.push(t, "contract2/sandbox:v1", img)
			return ref, reg.options(), with(passes(append(upToPull, IDPlatform, IDSize)...), IDBaseMarker, sandbox.Fail,
				`the image is built on sandbox base contract "2", and this hub runs contract "1": the user, directories and tools agentd expects may be missing or elsewhere`,
				wantBaseFix), h + "/contract2/sandbox@" + digestOf(t, img)
		},
	}, {
		name: "older base build warns",
		setup: func(t *testing.T) (string, Options, sandbox.Report, string) {
			img := testImage(t, "amd64", map[string]string{sandbox.LabelBaseMarker: "1", sandbox.LabelBaseBuild: "b1"})
			ref := reg.push(t, "older/sandbox:v1", img)
			return ref, reg.options(), with(passes(append(upToPull, IDPlatform, IDSize, IDBaseMarker)...), IDBaseBuild, sandbox.Warn,
				"built on an older base build b1 (current b2): the agent misses the fixes made to the base since",
				"rebuild to get fixes: docker build --pull (FROM ghcr.io/devdepot-ai/sandbox-base:1)"), h + "/older/sandbox@" + digestOf(t, img)
		},
	}, {
		name: "no base build known: not checked",
		setup: func(t *testing.T) (string, Options, sandbox.Report, string) {
			img := testImage(t, "amd64", map[string]string{sandbox.LabelBaseMarker: "1"})
			ref := reg.push(t, "nobuild/sandbox:v1", img)
			opts := reg.options()
			opts.BaseBuild = ""
			return ref, opts, passes(append(upToPull, IDPlatform, IDSize, IDBaseMarker)...), h + "/nobuild/sandbox@" + digestOf(t, img)
		},
	}, {
		name: "arm64 single-platform image",
		setup: func(t *testing.T) (string, Options, sandbox.Report, string) {
			ref := reg.push(t, "arm/sandbox:v1", testImage(t, "arm64", baseLabels))
			return ref, reg.options(), with(passes(upToPull...), IDPlatform, sandbox.Fail,
				`the image is built for linux/arm64 (its config says so): on the linux/amd64 hosts sandboxes run on, its programs fail with "exec format error"`,
				"build for linux/amd64 and push: docker buildx build --platform linux/amd64 -t "+ref+" --push ."), ""
		},
	}, {
		name: "index without amd64",
		setup: func(t *testing.T) (string, Options, sandbox.Report, string) {
			idx := testIndex([]string{"linux/arm64", "linux/arm/v7", "unknown/unknown"},
				[]v1.Image{testImage(t, "arm64", baseLabels), testImage(t, "arm", baseLabels), testImage(t, "", nil)})
			ref := reg.push(t, "armindex/sandbox:v1", idx)
			return ref, reg.options(), with(passes(upToPull...), IDPlatform, sandbox.Fail,
				"the image has no linux/amd64 variant (it has linux/arm64, linux/arm/v7): sandboxes run on linux/amd64, so the container could not start",
				"build for linux/amd64 and push: docker buildx build --platform linux/amd64 -t "+ref+" --push ."), ""
		},
	}, {
		name: "index with amd64: the child's digest",
		setup: func(t *testing.T) (string, Options, sandbox.Report, string) {
			amd := testImage(t, "amd64", baseLabels)
			idx := testIndex([]string{"linux/arm64", "linux/amd64"}, []v1.Image{testImage(t, "arm64", baseLabels), amd})
			ref := reg.push(t, "multi/sandbox:v1", idx)
			return ref, reg.options(), passes(append(upToPull, IDPlatform, IDSize, IDBaseMarker, IDBaseBuild)...),
				h + "/multi/sandbox@" + digestOf(t, amd)
		},
	}, {
		name: "index entry claims amd64, config says arm64",
		setup: func(t *testing.T) (string, Options, sandbox.Report, string) {
			idx := testIndex([]string{"linux/amd64"}, []v1.Image{testImage(t, "arm64", baseLabels)})
			ref := reg.push(t, "liar/sandbox:v1", idx)
			return ref, reg.options(), with(passes(upToPull...), IDPlatform, sandbox.Fail,
				`the image is built for linux/arm64 (its config says so): on the linux/amd64 hosts sandboxes run on, its programs fail with "exec format error"`,
				"build for linux/amd64 and push: docker buildx build --platform linux/amd64 -t "+ref+" --push ."), ""
		},
	}, {
		name: "over a small size limit",
		setup: func(t *testing.T) (string, Options, sandbox.Report, string) {
			img := testImage(t, "amd64", baseLabels)
			ref := reg.push(t, "big/sandbox:v1", img)
			opts := reg.options()
			opts.MaxCompressedBytes = 100
			want := with(passes(append(upToPull, IDPlatform)...), IDSize, sandbox.Fail,
				"the image is "+human(compressed(t, img))+" compressed, over this hub's limit of 100 B: the hub will not pull it, so no sandbox can start",
				"make it smaller: a multi-stage build, fewer tools, package caches removed in the RUN that made them (rm -rf /var/lib/apt/lists/*, pip --no-cache-dir)")
			return ref, opts, append(want, passes(IDBaseMarker, IDBaseBuild)...), h + "/big/sandbox@" + digestOf(t, img)
		},
	}, {
		name: "a limit above 5 GB is clamped",
		setup: func(t *testing.T) (string, Options, sandbox.Report, string) {
			img := testImage(t, "amd64", baseLabels)
			reg.push(t, "huge/sandbox:real", img)
			m, err := img.Manifest()
			if err != nil {
				t.Fatal(err)
			}
			m = m.DeepCopy()
			m.Layers[0].Size = 5_500_000_000 - compressed(t, img) + m.Layers[0].Size // layers are never read
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			ref := reg.push(t, "huge/sandbox:v1", rawManifest(b))
			dgst, _, _ := v1.SHA256(strings.NewReader(string(b)))
			opts := reg.options()
			opts.MaxCompressedBytes = 10_000_000_000
			want := with(passes(append(upToPull, IDPlatform)...), IDSize, sandbox.Fail,
				"the image is 5.5 GB compressed, over this hub's limit of 5 GB: the hub will not pull it, so no sandbox can start",
				"make it smaller: a multi-stage build, fewer tools, package caches removed in the RUN that made them (rm -rf /var/lib/apt/lists/*, pip --no-cache-dir)")
			return ref, opts, append(want, passes(IDBaseMarker, IDBaseBuild)...), h + "/huge/sandbox@" + dgst.String()
		},
	}, {
		name: "implicit registry: no request",
		setup: func(t *testing.T) (string, Options, sandbox.Report, string) {
			return "acme/sandbox:v1", Options{Transport: noNetwork{t}}, with(nil, IDReferenceSyntax, sandbox.Fail,
				"acme/sandbox:v1 leaves the registry implicit: the hub never guesses, since a guess can pull another image than the one you built",
				"write docker.io/acme/sandbox:v1"), ""
		},
	}, {
		name: "implicit registry, namespace and tag",
		setup: func(t *testing.T) (string, Options, sandbox.Report, string) {
			return "ubuntu", Options{Transport: noNetwork{t}}, with(nil, IDReferenceSyntax, sandbox.Fail,
				"ubuntu leaves the registry, the library/ namespace and the tag implicit: the hub never guesses, since a guess can pull another image than the one you built",
				"write docker.io/library/ubuntu:latest"), ""
		},
	}, {
		name: "implicit tag",
		setup: func(t *testing.T) (string, Options, sandbox.Report, string) {
			return "docker.io/acme/sandbox", Options{Transport: noNetwork{t}}, with(nil, IDReferenceSyntax, sandbox.Fail,
				"docker.io/acme/sandbox leaves the tag implicit: the hub never guesses, since a guess can pull another image than the one you built",
				"write docker.io/acme/sandbox:latest"), ""
		},
	}, {
		name: "path traversal: no request",
		setup: func(t *testing.T) (string, Options, sandbox.Report, string) {
			return "ghcr.io/../../etc/passwd:1", Options{Transport: noNetwork{t}}, with(nil, IDReferenceSyntax, sandbox.Fail,
				`"ghcr.io/../../etc/passwd:1" is not an image reference (invalid image reference: repository path component "..": want lowercase letters and digits separated by '.', '_', '__' or '-' (no empty, '.' or '..' components)): there is nothing to pull`,
				"write it as REGISTRY/REPOSITORY:TAG in lowercase, e.g. docker.io/acme/sandbox:v1"), ""
		},
	}, {
		name: "empty",
		setup: func(t *testing.T) (string, Options, sandbox.Report, string) {
			return " ", Options{Transport: noNetwork{t}}, with(nil, IDReferenceSyntax, sandbox.Fail,
				"there is no image to run: the reference is empty", "give the full reference, e.g. docker.io/acme/sandbox:v1"), ""
		},
	}, {
		name: "spaces",
		setup: func(t *testing.T) (string, Options, sandbox.Report, string) {
			return "docker.io/acme/sandbox: v1", Options{Transport: noNetwork{t}}, with(nil, IDReferenceSyntax, sandbox.Fail,
				`"docker.io/acme/sandbox: v1" contains spaces, so it names no image`, "write it without spaces, e.g. docker.io/acme/sandbox:v1"), ""
		},
	}, {
		name: "over-long",
		setup: func(t *testing.T) (string, Options, sandbox.Report, string) {
			return "docker.io/acme/" + strings.Repeat("a", 600) + ":v1", Options{Transport: noNetwork{t}}, with(nil, IDReferenceSyntax, sandbox.Fail,
				"the reference is 618 characters long, more than 512: no registry holds such a name", "give the full reference, e.g. docker.io/acme/sandbox:v1"), ""
		},
	}, {
		name: "not a reference",
		setup: func(t *testing.T) (string, Options, sandbox.Report, string) {
			return "docker.io/Acme/sandbox:v1", Options{Transport: noNetwork{t}}, with(nil, IDReferenceSyntax, sandbox.Fail,
				`"docker.io/Acme/sandbox:v1" is not an image reference (repository can only contain the characters `+"`abcdefghijklmnopqrstuvwxyz0123456789_-./`"+`: Acme/sandbox): there is nothing to pull`,
				"write it as REGISTRY/REPOSITORY:TAG in lowercase, e.g. docker.io/acme/sandbox:v1"), ""
		},
	}, {
		name: "registry not allowed: no request",
		setup: func(t *testing.T) (string, Options, sandbox.Report, string) {
			return "registry.example.com/acme/sandbox:v1", Options{Transport: noNetwork{t}}, with(passes(IDReferenceSyntax), IDReferenceRegistry, sandbox.Fail,
				"this hub does not pull from registry.example.com, so no sandbox can start from this image",
				"push the image to "+wantAllowList+"; if you run the hub, allow the registry: --allow-registry registry.example.com on agenthub serve"), ""
		},
	}, {
		name: "loopback registry not allowed",
		setup: func(t *testing.T) (string, Options, sandbox.Report, string) {
			ref := reg.push(t, "notallowed/sandbox:v1", testImage(t, "amd64", baseLabels))
			opts := reg.options()
			opts.AllowRegistries, opts.Transport = nil, noNetwork{t}
			return ref, opts, with(passes(IDReferenceSyntax), IDReferenceRegistry, sandbox.Fail,
				"this hub does not pull from "+h+", so no sandbox can start from this image",
				"push the image to "+wantAllowList+"; if you run the hub, allow the registry: --allow-registry "+h+" on agenthub serve"), ""
		},
	}, {
		name: "registry allowed by a pattern",
		setup: func(t *testing.T) (string, Options, sandbox.Report, string) {
			img := testImage(t, "amd64", baseLabels)
			reg.push(t, "pattern/sandbox:v1", img)
			opts := Options{
				AllowRegistries: []string{"*.Example.com"},
				Insecure:        func(h string) bool { return h == "registry.example.com" },
				Transport:       redirect{h},
			}
			return "registry.example.com/pattern/sandbox:v1", opts, passes(append(upToPull, IDPlatform, IDSize, IDBaseMarker)...),
				"registry.example.com/pattern/sandbox@" + digestOf(t, img)
		},
	}, {
		name: "private repository",
		setup: func(t *testing.T) (string, Options, sandbox.Report, string) {
			return h + "/private/sandbox:v1", reg.options(), with(passes(IDReferenceSyntax, IDReferenceRegistry), IDPullAnonymous, sandbox.Fail,
				"the image must be public: sandboxes pull it without credentials, and "+h+" refused an anonymous pull of "+h+"/private/sandbox (401 Unauthorized)",
				"make "+h+"/private/sandbox public, or check its name: for a repository that does not exist some registries answer the same"), ""
		},
	}, {
		name: "unknown tag",
		setup: func(t *testing.T) (string, Options, sandbox.Report, string) {
			reg.push(t, "known/sandbox:v1", testImage(t, "amd64", baseLabels))
			return h + "/known/sandbox:v2", reg.options(), with(passes(IDReferenceSyntax, IDReferenceRegistry), IDPullAnonymous, sandbox.Fail,
				"no such image or tag: "+h+" has no "+h+"/known/sandbox:v2, so there is nothing to start a sandbox from",
				"check the repository and tag, or push the image: docker push "+h+"/known/sandbox:v2"), ""
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ref, opts, want, digest := tt.setup(t)
			got, err := Run(t.Context(), ref, opts)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if diff := cmp.Diff(got.Report, want); diff != "" {
				t.Errorf("Report (-got +want):\n%s", diff)
			}
			if got.Digest != digest {
				t.Errorf("Digest = %q, want %q", got.Digest, digest)
			}
		})
	}
}

func TestRunResultOfGoodImage(t *testing.T) {
	t.Parallel()
	reg := newTestRegistry(t)
	img := testImage(t, "amd64", baseLabels)
	ref := reg.push(t, "good/sandbox:v1", img)
	got, err := Run(t.Context(), ref, reg.options())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got.Labels, baseLabels); diff != "" {
		t.Errorf("Labels (-got +want):\n%s", diff)
	}
	if got.CompressedBytes != compressed(t, img) {
		t.Errorf("CompressedBytes = %d, want %d", got.CompressedBytes, compressed(t, img))
	}
	if got.Config == nil || got.Config.Architecture != "amd64" {
		t.Errorf("Config = %+v, want the amd64 config", got.Config)
	}
}

func TestRunUnreachable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	host := strings.TrimPrefix(srv.URL, "http://")
	srv.Close()
	opts := Options{AllowRegistries: []string{host}, Insecure: func(h string) bool { return h == host }}
	got, err := Run(t.Context(), host+"/gone/sandbox:v1", opts)
	if err != nil {
		t.Fatal(err)
	}
	last := got.Report[len(got.Report)-1]
	if last.ID != IDPullAnonymous || last.Status != sandbox.Fail ||
		!strings.HasPrefix(last.Breaks, "the registry "+host+" could not be reached, so the image cannot be checked or pulled (") ||
		last.Fix != "check the registry's host name; if it was down, try again later: agentctl env revalidate NAME" {
		t.Errorf("last check = %+v, want pull.anonymous failing as unreachable", last)
	}
}

// TestRunHTTPSOnly: a loopback registry not in Insecure is not spoken to
// in plain http, though the name package would.
func TestRunHTTPSOnly(t *testing.T) {
	t.Parallel()
	reg := newTestRegistry(t)
	ref := reg.push(t, "tls/sandbox:v1", testImage(t, "amd64", baseLabels))
	before := reg.requests.Load()
	got, err := Run(t.Context(), ref, Options{AllowRegistries: []string{reg.host}})
	if err != nil {
		t.Fatal(err)
	}
	if n := reg.requests.Load() - before; n != 0 {
		t.Errorf("registry served %d plain http requests, want 0", n)
	}
	if !got.Report.Failed() || got.Report[len(got.Report)-1].ID != IDPullAnonymous {
		t.Errorf("Report = %+v, want pull.anonymous failed", got.Report)
	}
}

func TestRunCancelled(t *testing.T) {
	t.Parallel()
	reg := newTestRegistry(t)
	ref := reg.push(t, "cancel/sandbox:v1", testImage(t, "amd64", baseLabels))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Run(ctx, ref, reg.options()); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
}

func TestHuman(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{
		0: "0 B", 999: "999 B", 1500: "1.5 kB", 5_000_000_000: "5 GB", 6_240_000_000: "6.24 GB", 5_500_000_600: "5.5 GB",
	} {
		if got := human(n); got != want {
			t.Errorf("human(%d) = %q, want %q", n, got, want)
		}
	}
}
