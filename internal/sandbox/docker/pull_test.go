package docker

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

const (
	mediaManifest = "application/vnd.docker.distribution.manifest.v2+json"
	mediaConfig   = "application/vnd.docker.container.image.v1+json"
	mediaLayer    = "application/vnd.docker.image.rootfs.diff.tar.gzip"
)

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// testRegistry is a minimal registry (v2 API, pulls only) on loopback,
// which the engine treats as an insecure registry by default. It serves
// repository agentd-test/pull: tag "1", a one-layer linux/amd64 image, and
// tag "broken", whose config blob does not match its digest.
type testRegistry struct {
	blobs     map[string][]byte
	manifests map[string][]byte // by tag and by digest
}

func newTestRegistry() (r *testRegistry, manifestDigest, configDigest string) {
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "hello", Mode: 0o644, Size: 6})
	_, _ = tw.Write([]byte("hello\n"))
	_ = tw.Close()
	layerDigest := digestOf(layer.Bytes()) // uncompressed: it is its own diff id

	config, _ := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config":       map[string]any{"User": "1000:1000", "Labels": map[string]string{"ai.devdepot.agentd.test": "pull"}},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
	})
	configDigest = digestOf(config)
	manifest := func(cfgDigest string) []byte {
		m, _ := json.Marshal(map[string]any{
			"schemaVersion": 2,
			"mediaType":     mediaManifest,
			"config":        map[string]any{"mediaType": mediaConfig, "size": len(config), "digest": cfgDigest},
			"layers":        []any{map[string]any{"mediaType": mediaLayer, "size": layer.Len(), "digest": layerDigest}},
		})
		return m
	}
	good := manifest(configDigest)
	manifestDigest = digestOf(good)
	brokenConfig := digestOf([]byte("not the config"))
	broken := manifest(brokenConfig)

	r = &testRegistry{
		blobs: map[string][]byte{layerDigest: layer.Bytes(), configDigest: config, brokenConfig: config},
		manifests: map[string][]byte{
			"1": good, manifestDigest: good,
			"broken": broken, digestOf(broken): broken,
		},
	}
	return r, manifestDigest, configDigest
}

func (r *testRegistry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	const repo = "/v2/agentd-test/pull/"
	var body []byte
	switch p := req.URL.Path; {
	case p == "/v2/":
		return
	case strings.HasPrefix(p, repo+"manifests/"):
		body = r.manifests[strings.TrimPrefix(p, repo+"manifests/")]
		if body != nil {
			w.Header().Set("Content-Type", mediaManifest)
			w.Header().Set("Docker-Content-Digest", digestOf(body))
		}
	case strings.HasPrefix(p, repo+"blobs/"):
		body = r.blobs[strings.TrimPrefix(p, repo+"blobs/")]
		w.Header().Set("Content-Type", "application/octet-stream")
	}
	if body == nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}`))
		return
	}
	if req.Method == http.MethodHead {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		return
	}
	_, _ = w.Write(body)
}

func TestPull(t *testing.T) {
	d := engine(t)
	reg, manifestDigest, configDigest := newTestRegistry()
	srv := httptest.NewServer(reg)
	t.Cleanup(srv.Close)
	repo := strings.TrimPrefix(srv.URL, "http://") + "/agentd-test/pull"
	t.Cleanup(func() {
		_, _ = d.cli.ImageRemove(cleanupCtx(t), configDigest, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	})

	img, err := d.Pull(t.Context(), repo+":1")
	if err != nil {
		t.Fatalf("Pull: %v", err)
	}
	if img.ID != configDigest || img.Architecture != "amd64" || img.OS != "linux" || img.User != "1000:1000" ||
		img.Labels["ai.devdepot.agentd.test"] != "pull" || !slices.Contains(img.RepoDigests, repo+"@"+manifestDigest) {
		t.Errorf("Pull by tag: %+v", img)
	}
	byDigest, err := d.Pull(t.Context(), repo+"@"+manifestDigest)
	if err != nil || byDigest.ID != configDigest {
		t.Errorf("Pull by digest: %+v, %v", byDigest, err)
	}

	if _, err := d.Pull(t.Context(), repo+":broken"); err == nil || !strings.Contains(err.Error(), "verification failed") {
		t.Errorf("Pull of an image whose config does not match its digest: %v", err)
	}
	if _, err := d.Pull(t.Context(), repo+":absent"); err == nil {
		t.Error("Pull of a missing tag succeeded")
	}
	if _, err := d.Image(t.Context(), repo+":absent"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Image of a missing tag: %v, want ErrNotFound", err)
	}
}
