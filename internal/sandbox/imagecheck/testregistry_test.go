package imagecheck

import (
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// testRegistry is an in-process registry on 127.0.0.1 whose repositories
// under private/ answer 401 to everyone.
type testRegistry struct {
	host     string
	requests atomic.Int64 // HTTP requests it served
}

func newTestRegistry(t *testing.T) *testRegistry {
	t.Helper()
	tr := &testRegistry{}
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		tr.requests.Add(1)
		if strings.HasPrefix(req.URL.Path, "/v2/private/") {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
			return
		}
		reg.ServeHTTP(w, req)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the https half of ggcr's ping
	srv.Start()
	t.Cleanup(srv.Close)
	tr.host = strings.TrimPrefix(srv.URL, "http://")
	return tr
}

// options allow the registry and speak plain http to it.
func (tr *testRegistry) options() Options {
	return Options{
		AllowRegistries: []string{tr.host},
		Insecure:        func(h string) bool { return h == tr.host },
		BaseBuild:       "b2",
	}
}

// push writes img or idx (a v1.Image or v1.ImageIndex) to repo:tag and
// returns the full reference.
func (tr *testRegistry) push(t *testing.T, repoTag string, x any) string {
	t.Helper()
	ref := tr.host + "/" + repoTag
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	switch x := x.(type) {
	case v1.Image:
		err = remote.Write(r, x)
	case v1.ImageIndex:
		err = remote.WriteIndex(r, x)
	case remote.Taggable:
		err = remote.Put(r, x)
	}
	if err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return ref
}

var baseLabels = map[string]string{sandbox.LabelBaseMarker: "1", sandbox.LabelBaseBuild: "b2"}

// testImage is a random two-layer image whose config says arch and labels.
func testImage(t *testing.T, arch string, labels map[string]string) v1.Image {
	t.Helper()
	img, err := random.Image(512, 2)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", arch
	cfg.Config.Labels = labels
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		t.Fatal(err)
	}
	return img
}

// testIndex indexes imgs under the platforms "os/arch[/variant]" given.
func testIndex(platforms []string, imgs []v1.Image) v1.ImageIndex {
	var idx v1.ImageIndex = empty.Index
	for i, p := range platforms {
		parts := append(strings.Split(p, "/"), "")
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: imgs[i], Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: parts[0], Architecture: parts[1], Variant: parts[2]},
		}})
	}
	return idx
}

func digestOf(t *testing.T, img v1.Image) string {
	t.Helper()
	h, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}

func compressed(t *testing.T, img v1.Image) int64 {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	n := m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n
}

// rawManifest is a manifest pushed as is.
type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error)        { return m, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return types.DockerManifestSchema2, nil }

// noNetwork fails the test on any request.
type noNetwork struct{ t *testing.T }

func (n noNetwork) RoundTrip(req *http.Request) (*http.Response, error) {
	n.t.Errorf("unexpected request %s %s", req.Method, req.URL)
	return nil, errors.New("no network in this test")
}

// redirect sends every request to host, whatever its URL names.
type redirect struct{ host string }

func (r redirect) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL.Host, req.Host = r.host, r.host
	return http.DefaultTransport.RoundTrip(req)
}
