package imagebuild

import (
	"context"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/devdepot-ai/agentd/internal/agentimage"
)

// Image is a runner image agenthub built.
type Image struct {
	ID        string
	Tags      []string // repository:tag names, sorted; none when dangling
	Agent     string   // the profile
	ContentID string
	Created   time.Time
	Size      int64
	// Latest is true when the image is some project's -latest of its agent.
	Latest bool
	// InUse is true when a container (a sandbox) was made from it.
	InUse bool
}

// List returns the runner images on the engine, newest first.
func (b *Builder) List(ctx context.Context) ([]Image, error) {
	res, err := b.cli.ImageList(ctx, client.ImageListOptions{
		Filters: client.Filters{}.Add("label", agentimage.LabelManaged+"=1"),
	})
	if err != nil {
		return nil, b.fail("list images", err)
	}
	ctrs, err := b.cli.ContainerList(ctx, client.ContainerListOptions{All: true})
	if err != nil {
		return nil, b.fail("list containers", err)
	}
	used := map[string]bool{}
	for _, c := range ctrs.Items {
		used[c.ImageID] = true
	}
	var out []Image
	for _, s := range res.Items {
		im := Image{
			ID:        s.ID,
			Agent:     s.Labels[agentimage.LabelAgent],
			ContentID: s.Labels[agentimage.LabelContentID],
			Created:   time.Unix(s.Created, 0),
			Size:      s.Size,
			InUse:     used[s.ID],
		}
		for _, t := range s.RepoTags {
			if t == "<none>:<none>" {
				continue
			}
			im.Tags = append(im.Tags, t)
			if strings.HasSuffix(t, "-latest") {
				im.Latest = true
			}
		}
		slices.Sort(im.Tags)
		out = append(out, im)
	}
	slices.SortFunc(out, func(a, b Image) int { return b.Created.Compare(a.Created) })
	return out, nil
}

// Present says which of refs the engine has.
func (b *Builder) Present(ctx context.Context, refs ...string) (map[string]bool, error) {
	out := make(map[string]bool, len(refs))
	for _, ref := range refs {
		_, err := b.cli.ImageInspect(ctx, ref)
		switch {
		case err == nil:
			out[ref] = true
		case cerrdefs.IsNotFound(err):
			out[ref] = false
		default:
			return nil, b.fail("inspect "+ref, err)
		}
	}
	return out, nil
}

// Prunable returns the runner images prune removes: those that are no
// project's -latest of their agent and that no container uses.
func Prunable(images []Image) []Image {
	var out []Image
	for _, im := range images {
		if !im.Latest && !im.InUse {
			out = append(out, im)
		}
	}
	return out
}

// Remove removes a runner image: each of its names, then (when it had none)
// the image itself. An image a container started using since it was listed
// stays, and the engine's refusal is returned.
func (b *Builder) Remove(ctx context.Context, im Image) error {
	if len(im.Tags) == 0 {
		_, err := b.cli.ImageRemove(ctx, im.ID, client.ImageRemoveOptions{PruneChildren: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			return b.fail("remove "+ShortID(im.ID), err)
		}
		return nil
	}
	for _, t := range im.Tags {
		// Removing the last name removes the image, unless a container uses it.
		if _, err := b.cli.ImageRemove(ctx, t, client.ImageRemoveOptions{PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return b.fail("remove "+t, err)
		}
	}
	return nil
}

// ShortID is an image id the way docker images prints it.
func ShortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		id = id[:12]
	}
	return id
}
