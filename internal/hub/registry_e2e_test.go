package hub_test

import (
	"context"
	"io"
	"log"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/sandbox/docker"
	"github.com/devdepot-ai/agentd/internal/sandbox/imagecheck"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
	"github.com/devdepot-ai/agentd/internal/testca"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// env create --image through validation to a running sandbox, from
// registries as admins run them, all one in-process registry on loopback:
// plain http on 127.0.0.1 (no flag, as Docker); plain http under a name
// only the hub's resolver knows, named by --insecure-registry (the engine
// cannot even resolve it: the hub fetches the digest and loads it); and
// behind TLS with a private CA, trusted through --registry-ca. The same
// plain registry under another name no flag covers is rejected naming
// --insecure-registry. On Kubernetes the node pulls with its own registry
// configuration: only the loopback registry is ready, the other two are
// rejected at the pull, saying why (the name only the hub resolves is not
// tried there: the node would ask this machine's DNS server for it).
func TestSandboxRegistriesAdminsRun(t *testing.T) {
	base := sandboxtest.BaseImage(t)
	store := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	plain := httptest.NewUnstartedServer(store)
	plain.Config.ErrorLog = log.New(io.Discard, "", 0)
	plain.Start()
	t.Cleanup(plain.Close)
	ca := testca.New(t)
	secure := httptest.NewUnstartedServer(store) // the same repositories, over TLS
	secure.TLS = ca.Server
	secure.Config.ErrorLog = log.New(io.Discard, "", 0)
	secure.StartTLS()
	t.Cleanup(secure.Close)
	plainAddr, tlsAddr := plain.Listener.Addr().String(), secure.Listener.Addr().String()
	if onKube() {
		sandboxtest.RemoveKubeImagesOf(t, "", plainAddr) // what the node's kubelet pulled
	}
	port := func(a string) string { return a[strings.LastIndex(a, ":")+1:] }
	named := "registry.agentd.test:" + port(plainAddr)
	unnamed := "other.agentd.test:" + port(plainAddr)
	tlsHost := "localhost:" + port(tlsAddr)

	// The base image, pushed by the engine (127.0.0.0/8: plain http).
	ref := plainAddr + "/acme/reg:v1"
	dockerCLI(t, "tag", base, ref)
	var untag []string
	t.Cleanup(func() {
		// By name only: the image is the base image's.
		_ = exec.Command("docker", append([]string{"rmi"}, append(untag, ref)...)...).Run()
	})
	dockerCLI(t, "push", "-q", ref)

	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cas, err := imagecheck.LoadCAs(caFile)
	if err != nil {
		t.Fatal(err)
	}
	reg := imagecheck.Registries{Insecure: []string{named}, CAs: cas, CAFile: caFile,
		// The test's resolver: the two names, to loopback only.
		Dial: func(ctx context.Context, network, a string) (net.Conn, error) {
			if a == named || a == unnamed {
				a = plainAddr
			}
			return (&net.Dialer{}).DialContext(ctx, network, a)
		}}
	h := startSandboxHubWith(t, func(o *sandboxes.Options) {
		if !onKube() {
			// The hub fetches what the engine cannot resolve, and loads it.
			drv, err := docker.New(docker.Options{Fetch: reg.Fetch})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { drv.Close() })
			o.Driver = drv
		}
		o.ImageCheck.AllowRegistries = []string{plainAddr, named, unnamed, tlsHost}
		reg.Apply(&o.ImageCheck)
	}, hubtest.Options{})
	run := h.agentctl()

	envs := []struct{ env, host string }{{"loopback", plainAddr}, {"insecure", named}, {"privateca", tlsHost}, {"unnamed", unnamed}}
	if onKube() {
		// Not the name only the test's resolver knows: the node's
		// containerd would ask this machine's DNS server for it, an
		// address the test does not own.
		envs = slices.DeleteFunc(envs, func(e struct{ env, host string }) bool { return e.env == "insecure" })
	}
	for _, tc := range envs {
		if code, out, errs := run("env", "create", tc.env, "--image", tc.host+"/acme/reg:v1", "--network", "none"); code != 0 {
			t.Fatalf("env create %s = %d %q %q", tc.env, code, out, errs)
		}
	}
	ready := []string{"loopback", "insecure", "privateca"}
	if onKube() {
		// The node's kubelet pulls, with its runtime's registry
		// configuration, not the hub's: plain http on loopback only, no
		// name the hub alone resolves, no CA but the system's. Those are
		// the node operator's to configure (docs/kubernetes.md, Images and
		// pulls); unconfigured, the pull fails, saying so.
		ready = ready[:1]
		for env, want := range map[string]string{"privateca": "ErrImagePull"} {
			e := h.waitEnv(env, 5*time.Minute)
			if c := failed(e, "pull.engine"); e.GetState() != hubv1.EnvironmentState_ENVIRONMENT_STATE_REJECTED || c == nil || !strings.Contains(c.GetBreaks(), want) {
				t.Errorf("environment %s on Kubernetes: %s, want rejected at pull.engine with %q\n%s", env, e.GetState(), want, reportText(e))
			}
		}
	}
	for _, env := range ready {
		e := h.waitEnv(env, 5*time.Minute)
		if e.GetState() != hubv1.EnvironmentState_ENVIRONMENT_STATE_READY {
			t.Errorf("environment %s: %s\n%s", env, e.GetState(), reportText(e))
			continue
		}
		untag = append(untag, e.GetPinned())
		if tag, ok := strings.CutPrefix(e.GetPinned(), named+"/acme/reg@sha256:"); ok {
			untag = append(untag, named+"/acme/reg:agentd-sha256-"+tag)
		}
		if code, out, errs := run("--env", env, "--conversation", "c1", "sh", "echo ok"); code != 0 || out != "ok\n" {
			t.Errorf("a call in %s = %d %q %q", env, code, out, errs)
		}
	}
	e := h.waitEnv("unnamed", 2*time.Minute)
	if c := failed(e, "pull.anonymous"); e.GetState() != hubv1.EnvironmentState_ENVIRONMENT_STATE_REJECTED ||
		!strings.Contains(reportText(e), "--insecure-registry "+unnamed+" on agenthub serve") {
		t.Errorf("environment unnamed: %s %v\n%s", e.GetState(), c, reportText(e))
	}
}
