package docker

import (
	"context"
	"io"
	"log"
	"net"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/moby/moby/client"

	"github.com/devdepot-ai/agentd/internal/sandbox/imagecheck"
)

// A registry the engine cannot pull from — here a name only the hub's
// resolver knows (the registry is in process on loopback), plain http
// through --insecure-registry — is read by the hub and loaded into the
// engine; the pinned repo@sha256 then names the image for Image (and
// Create). A registry the flags do not cover keeps the engine's error.
func TestPullFetchLoad(t *testing.T) {
	d0 := engine(t)
	srv := httptest.NewUnstartedServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	host := "registry.agentd.test:" + addr[strings.LastIndex(addr, ":")+1:]
	dial := func(ctx context.Context, network, a string) (net.Conn, error) {
		if a == host {
			a = addr // the test's resolver: only this name, only to loopback
		}
		return (&net.Dialer{}).DialContext(ctx, network, a)
	}
	reg := imagecheck.Registries{Insecure: []string{host}, Dial: dial}

	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := img.ConfigFile()
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Config.Labels = map[string]string{"ai.devdepot.agentd.test": "fetch"}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(host+"/agentd-test/fetch:1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img, remote.WithTransport(reg.Transport())); err != nil {
		t.Fatalf("push: %v", err)
	}
	dig, _ := img.Digest()
	cfgName, _ := img.ConfigName()
	ref := host + "/agentd-test/fetch@" + dig.String()
	t.Cleanup(func() {
		_, _ = d0.cli.ImageRemove(cleanupCtx(t), cfgName.String(), client.ImageRemoveOptions{Force: true, PruneChildren: true})
	})

	if _, err := d0.Pull(t.Context(), ref); err == nil {
		t.Fatal("the engine pulled from a name only the test resolves")
	}
	other, err := New(Options{Fetch: imagecheck.Registries{Dial: dial}.Fetch})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Pull(t.Context(), ref); err == nil || strings.Contains(err.Error(), "nor could the hub") {
		t.Errorf("Pull from a registry no flag covers = %v; want the engine's error alone", err)
	}

	d, err := New(Options{Fetch: reg.Fetch})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	got, err := d.Pull(t.Context(), ref)
	if err != nil {
		t.Fatalf("Pull with the hub's fetch: %v", err)
	}
	if got.ID != cfgName.String() || got.Architecture != "amd64" || got.Labels["ai.devdepot.agentd.test"] != "fetch" {
		t.Errorf("Pull = %+v; want id %s", got, cfgName)
	}
	if again, err := d.Image(t.Context(), ref); err != nil || again.ID != got.ID {
		t.Errorf("Image(%s) = %+v, %v", ref, again, err)
	}
	if local := d.local(t.Context(), ref); local != host+"/agentd-test/fetch:agentd-sha256-"+dig.Hex {
		t.Errorf("local(%s) = %s", ref, local)
	}
}
