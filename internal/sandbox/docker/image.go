package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/moby/moby/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// platform is the only one sandboxes run on.
var platform = ocispec.Platform{OS: "linux", Architecture: "amd64"}

// Image describes the local image ref (a name, repo@sha256:… or an id).
func (d *Driver) Image(ctx context.Context, ref string) (sandbox.Image, error) {
	ref = d.local(ctx, ref)
	res, err := d.cli.ImageInspect(ctx, ref)
	if err != nil {
		return sandbox.Image{}, d.fail("inspect image "+ref, err)
	}
	img := sandbox.Image{
		ID:           res.ID,
		RepoDigests:  res.RepoDigests,
		Architecture: res.Architecture,
		OS:           res.Os,
		Size:         res.Size,
	}
	if c := res.Config; c != nil {
		img.Labels = c.Labels
		img.User = c.User
		img.Env = c.Env
		img.WorkingDir = c.WorkingDir
	}
	return img, nil
}

// Pull pulls ref for linux/amd64, reading the engine's progress stream to
// its end (an error in it fails the pull), and describes the image. The
// caller checks img.Architecture: an engine may pull a single-platform
// image for another platform whatever was asked.
func (d *Driver) Pull(ctx context.Context, ref string) (sandbox.Image, error) {
	rc, err := d.cli.ImagePull(ctx, ref, client.ImagePullOptions{Platforms: []ocispec.Platform{platform}})
	if err != nil {
		if img, ok, lerr := d.fetchLoad(ctx, ref, err); ok {
			return img, lerr
		}
		return sandbox.Image{}, d.fail("pull "+ref, err)
	}
	defer rc.Close()
	if err := readProgress(rc); err != nil {
		if cerr := ctx.Err(); cerr != nil {
			err = cerr
		} else if img, ok, lerr := d.fetchLoad(ctx, ref, err); ok {
			return img, lerr
		}
		return sandbox.Image{}, fmt.Errorf("pull %s: %w", ref, err)
	}
	return d.Image(ctx, ref)
}

// progress is one message of the engine's JSON progress stream; engines
// report a failure in errorDetail, older ones in error as well.
type progress struct {
	Error       string `json:"error"`
	ErrorDetail *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
}

// readProgress reads a progress stream to its end and returns the first
// error it reports.
func readProgress(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var p progress
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("read the engine's progress: %w", err)
		}
		if p.ErrorDetail != nil && p.ErrorDetail.Message != "" {
			return errors.New(p.ErrorDetail.Message)
		}
		if p.Error != "" {
			return errors.New(p.Error)
		}
	}
}
