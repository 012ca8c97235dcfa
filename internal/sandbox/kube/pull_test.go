package kube

import (
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
)

// pullRegistry is an in-process registry on a loopback port (the node's
// containerd runs on this host's network, and pulls from 127.0.0.1 over
// plain http), counting the manifest requests it serves (HEAD or GET).
type pullRegistry struct {
	host      string // 127.0.0.1:PORT
	manifests atomic.Int64
}

func startPullRegistry(t *testing.T) *pullRegistry {
	t.Helper()
	r := &pullRegistry{}
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if (req.Method == http.MethodGet || req.Method == http.MethodHead) && strings.Contains(req.URL.Path, "/manifests/") {
			r.manifests.Add(1)
		}
		reg.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.host = strings.TrimPrefix(srv.URL, "http://")
	sandboxtest.RemoveKubeImagesOf(t, "", r.host) // what the node pulled from it
	return r
}

// push pushes a small random linux/amd64 image as repo:tag and returns
// its tag and digest references.
func (r *pullRegistry) push(t *testing.T, repoTag string) (tag, digest string) {
	t.Helper()
	img, err := random.Image(4096, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(r.host+"/"+repoTag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithContext(t.Context())); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	tag = r.host + "/" + repoTag
	return tag, tag[:strings.LastIndex(tag, ":")] + "@" + d.String()
}

// noPullPodLeft fails the test for any pull Pod left in d's namespace.
func noPullPodLeft(t *testing.T, d *Driver) {
	t.Helper()
	pods, err := d.cs.CoreV1().Pods(d.ns).List(t.Context(), metav1.ListOptions{LabelSelector: labelPull})
	if err != nil {
		t.Fatalf("list pull pods: %v", err)
	}
	for _, p := range pods.Items {
		t.Errorf("pull pod %s (%s) outlived its pull", p.Name, p.Annotations[labelPull])
	}
}

// Pull has the node's kubelet pull an image by tag from a registry on
// loopback, and Image then finds it by that tag; by digest (how the hub
// pins an image) it pulls again and names the same image. No pull Pod is
// left.
func TestPull(t *testing.T) {
	d := cluster(t)
	reg := startPullRegistry(t)
	tag, digest := reg.push(t, "agentd-test/pull-"+randHex(4)+":v1")
	if _, err := d.Image(t.Context(), tag); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Image %s before the pull: %v, want ErrNotFound", tag, err)
	}

	start := time.Now()
	img, err := d.Pull(t.Context(), tag)
	if err != nil {
		t.Fatalf("Pull %s: %v", tag, err)
	}
	t.Logf("Pull by tag: %s", time.Since(start).Round(time.Millisecond))
	if img.ID == "" || !slices.Contains(img.RepoDigests, digest) {
		t.Errorf("Pull %s = %+v; want an ID and the repo digest %s", tag, img, digest)
	}
	if reg.manifests.Load() == 0 {
		t.Errorf("Pull %s: the registry served no manifest", tag)
	}
	if got, err := d.Image(t.Context(), tag); err != nil || got.ID != img.ID {
		t.Errorf("Image %s after the pull = %+v, %v; want ID %s", tag, got, err, img.ID)
	}
	noPullPodLeft(t, d)

	served := reg.manifests.Load()
	start = time.Now()
	pinned, err := d.Pull(t.Context(), digest)
	if err != nil {
		t.Fatalf("Pull %s: %v", digest, err)
	}
	t.Logf("Pull by digest: %s", time.Since(start).Round(time.Millisecond))
	if pinned.ID != img.ID {
		t.Errorf("Pull %s: ID %s, want %s (the tag's)", digest, pinned.ID, img.ID)
	}
	if reg.manifests.Load() == served {
		t.Errorf("Pull %s: the registry served no manifest (imagePullPolicy Always asks it)", digest)
	}
	noPullPodLeft(t, d)
}

// A pull that cannot succeed fails with the kubelet's reason, promptly,
// leaves the image missing and no pull Pod behind: a tag the registry
// lacks, a registry nothing listens on, and a TLS registry the node does
// not trust (the node operator's configuration, which the error names).
func TestPullFails(t *testing.T) {
	d := cluster(t)
	reg := startPullRegistry(t)
	tlsReg := httptest.NewTLSServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(tlsReg.Close)
	tlsRef := "localhost:" + tlsReg.URL[strings.LastIndex(tlsReg.URL, ":")+1:] + "/agentd-test/secure:v1"
	for _, tc := range []struct{ name, ref, want string }{
		{"missing tag", reg.host + "/agentd-test/absent-" + randHex(4) + ":v1", "not found"},
		{"no registry", "127.0.0.1:1/agentd-test/none:v1", "connection refused"},
		{"untrusted tls", tlsRef, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := d.Pull(t.Context(), tc.ref)
			t.Logf("Pull %s: %s: %v", tc.ref, time.Since(start).Round(time.Millisecond), err)
			if err == nil {
				t.Fatalf("Pull %s succeeded", tc.ref)
			}
			if !strings.Contains(err.Error(), "ErrImagePull") && !strings.Contains(err.Error(), "ImagePullBackOff") {
				t.Errorf("Pull %s: %v; want the kubelet's pull failure", tc.ref, err)
			}
			if tc.want != "" && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Pull %s: %v; want %q in it", tc.ref, err, tc.want)
			}
			if _, err := d.Image(t.Context(), tc.ref); !errors.Is(err, sandbox.ErrNotFound) {
				t.Errorf("Image %s after a failed pull: %v, want ErrNotFound", tc.ref, err)
			}
			noPullPodLeft(t, d)
		})
	}
}

// The pull Pod pulls (imagePullPolicy Always) on the node it is pinned
// to, with the sandbox's hardening, under the deny-all NetworkPolicy, and
// its command is no file an image can hold.
func TestPullPodHardening(t *testing.T) {
	d := &Driver{}
	p := pullPod(d.podSecurity(), "127.0.0.1:5000/acme/x:v1", "node-a")
	c := p.Spec.Containers[0]
	if c.ImagePullPolicy != corev1.PullAlways || c.Image != "127.0.0.1:5000/acme/x:v1" || p.Spec.NodeName != "node-a" {
		t.Errorf("pull pod: policy %s image %s node %s", c.ImagePullPolicy, c.Image, p.Spec.NodeName)
	}
	if diff := cmp.Diff(c.SecurityContext, containerSecurity()); diff != "" {
		t.Errorf("container security (-got +want):\n%s", diff)
	}
	if sc := p.Spec.SecurityContext; sc == nil || *sc.RunAsUser != uid || !*sc.RunAsNonRoot {
		t.Errorf("pod security: %+v", sc)
	}
	if *p.Spec.AutomountServiceAccountToken || p.Spec.RestartPolicy != corev1.RestartPolicyNever || p.Spec.ActiveDeadlineSeconds == nil {
		t.Errorf("pull pod spec: token %v restart %s deadline %v", *p.Spec.AutomountServiceAccountToken, p.Spec.RestartPolicy, p.Spec.ActiveDeadlineSeconds)
	}
	sel, err := metav1.LabelSelectorAsSelector(&policies(NetworkNone, nil)[0].Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(p.Labels)) {
		t.Errorf("the deny-all policy (%s) does not select the pull pod's labels %v", sel, p.Labels)
	}
	if !slices.Equal(c.Command, []string{"/dev/null/agentd-pull"}) || len(c.Args) != 0 {
		t.Errorf("pull pod command %q %q: want a path no image holds", c.Command, c.Args)
	}
}

// A failed pull's error quotes the kubelet and, where its message shows
// the node's runtime configuration is at fault, says what to configure.
func TestPullErrorHints(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{`failed to pull and unpack image "localhost:4443/a:v1": failed to resolve reference: ... http: server gave HTTP response to HTTPS client`, "does not trust this registry"},
		{`... tls: failed to verify certificate: x509: certificate signed by unknown authority`, "does not trust this registry"},
		{`dial tcp: lookup registry.example on 10.0.0.1:53: no such host`, "cannot resolve the registry's name"},
		{`... 401 Unauthorized`, "pulls anonymously"},
		{`... not found`, ""},
	} {
		err := pullError("n1", &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: tc.msg})
		if !strings.Contains(err.Error(), "ErrImagePull: "+tc.msg) {
			t.Errorf("pullError(%q) = %v: want the kubelet's reason and message", tc.msg, err)
		}
		if tc.want != "" && !strings.Contains(err.Error(), tc.want) || tc.want == "" && strings.Contains(err.Error(), "(") {
			t.Errorf("pullError(%q) = %v: want hint %q", tc.msg, err, tc.want)
		}
	}
}
