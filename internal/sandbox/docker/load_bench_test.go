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
	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/sandbox/imagecheck"
)

// The engine's own pull (from 127.0.0.1, plain http by Docker's default)
// beside the hub's fetch and load (the same registry under a name only the
// hub resolves, --insecure-registry), of one 3-layer image of 3 × 32 MiB
// random (incompressible) bytes, removed from the engine after each pull:
// go test -run '^$' -bench PullPath -benchtime 5x ./internal/sandbox/docker/
func BenchmarkPullPath(b *testing.B) {
	ctx := context.Background()
	srv := httptest.NewUnstartedServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	named := "registry.agentd.test:" + addr[strings.LastIndex(addr, ":")+1:]
	reg := imagecheck.Registries{Insecure: []string{named}, Dial: func(ctx context.Context, network, a string) (net.Conn, error) {
		if a == named {
			a = addr
		}
		return (&net.Dialer{}).DialContext(ctx, network, a)
	}}
	img, err := random.Image(32<<20, 3)
	if err != nil {
		b.Fatal(err)
	}
	cfg, _ := img.ConfigFile()
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		b.Fatal(err)
	}
	tag, _ := name.NewTag(addr+"/agentd-test/bench:1", name.Insecure)
	if err := remote.Write(tag, img, remote.WithTransport(reg.Transport())); err != nil {
		b.Fatal(err)
	}
	dig, _ := img.Digest()
	id, _ := img.ConfigName()
	d, err := New(Options{Fetch: reg.Fetch, Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	if err := d.Ping(ctx); err != nil {
		b.Skipf("no engine: %v", err)
	}
	remove := func() {
		_, _ = d.cli.ImageRemove(ctx, id.String(), client.ImageRemoveOptions{Force: true, PruneChildren: true})
	}
	defer remove()
	for _, bc := range []struct{ name, host string }{{"engine", addr}, {"hubfetch", named}} {
		b.Run(bc.name, func(b *testing.B) {
			ref := bc.host + "/agentd-test/bench@" + dig.String()
			b.SetBytes(3 * 32 << 20)
			for b.Loop() {
				b.StopTimer()
				remove()
				b.StartTimer()
				if _, err := d.Pull(ctx, ref); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
