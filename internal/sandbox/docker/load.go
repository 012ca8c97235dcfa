package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/moby/moby/client"
	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// An image from a registry the engine cannot pull from (plain http to a
// host its daemon.json does not call insecure, a certificate from a CA it
// does not trust): the hub reads the pinned digest itself (Options.Fetch,
// with agenthub serve's --insecure-registry and --registry-ca) and loads
// it into the engine. A loaded image has no repo digest (the engine only
// records those for pulls), and the engine refuses to tag a digest; so it
// is tagged REPO:agentd-sha256-HEX, a name made from the digest the hub
// fetched by (go-containerregistry checks the manifest against it), and
// local finds it under that name wherever repo@sha256:HEX is asked for.

// loadedTag is the tag a hub-fetched repo@sha256:HEX is loaded under;
// ok false for a reference that is not repo@sha256:HEX.
func loadedTag(ref string) (string, bool) {
	repo, dig, ok := strings.Cut(ref, "@sha256:")
	if !ok || len(dig) != 64 || strings.Contains(dig, "@") {
		return "", false
	}
	return repo + ":agentd-sha256-" + dig, true
}

// local is the name the engine knows ref by: ref itself, or its loaded
// tag when only that is on the engine.
func (d *Driver) local(ctx context.Context, ref string) string {
	tag, ok := loadedTag(ref)
	if !ok || d.fetch == nil {
		return ref
	}
	if _, err := d.cli.ImageInspect(ctx, ref); err == nil {
		return ref
	}
	if _, err := d.cli.ImageInspect(ctx, tag); err == nil {
		return tag
	}
	return ref
}

// fetchLoad reads ref through Options.Fetch into the engine, after the
// engine's own pull failed with pullErr; ok false when Fetch does not
// cover ref's registry (the pull's error stands).
func (d *Driver) fetchLoad(ctx context.Context, ref string, pullErr error) (sandbox.Image, bool, error) {
	tag, ok := loadedTag(ref)
	if !ok || d.fetch == nil {
		return sandbox.Image{}, false, nil
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	var covered bool
	go func() {
		var err error
		covered, err = d.fetch(ctx, ref, tag, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	res, lerr := d.cli.ImageLoad(ctx, pr, client.ImageLoadWithQuiet(true))
	if lerr == nil {
		lerr = readProgress(res)
		res.Close()
	}
	pr.CloseWithError(errors.New("load ended"))
	ferr := <-done
	if !covered {
		return sandbox.Image{}, false, nil
	}
	d.log.Info("the engine could not pull an image; the hub fetched and loaded it", zap.String("image", ref), zap.NamedError("pull", pullErr))
	if ferr != nil {
		return sandbox.Image{}, true, fmt.Errorf("pull %s: the engine could not (%v), nor could the hub: %w", ref, pullErr, ferr)
	}
	if lerr != nil {
		return sandbox.Image{}, true, fmt.Errorf("load %s into the engine: %w", ref, lerr)
	}
	img, err := d.Image(ctx, ref)
	return img, true, err
}
