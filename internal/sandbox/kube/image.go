package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// Image describes an image as the nodes report it (Node.status.images):
// its id is the first of its names that is a digest (repo@sha256:… or
// sha256:…), else its first name. The API shows no image config, so Labels,
// User, Env, Architecture and the like are empty: what the hub checks in a
// config, it checks in the registry or the local engine. A ref matches an
// image on any node that lists it under that name (ref as given, or with
// Docker's implicit docker.io/library/ and :latest); ErrNotFound when no
// node the driver's Pods may run on has it (eligible).
func (d *Driver) Image(ctx context.Context, ref string) (sandbox.Image, error) {
	nodes, err := d.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return sandbox.Image{}, d.fail("list nodes", err)
	}
	want := candidates(ref)
	for _, n := range nodes.Items {
		if !d.eligible(&n) {
			continue
		}
		for _, img := range n.Status.Images {
			if i := slices.IndexFunc(img.Names, func(name string) bool { return slices.Contains(want, name) }); i >= 0 {
				return image(img, img.Names[i]), nil
			}
		}
	}
	return sandbox.Image{}, fmt.Errorf("image %s: %w on %s (Pull has the kubelets pull it, or import it into each node's runtime)", ref, sandbox.ErrNotFound, d.placementNote())
}

// image is the description of a node's image, found under its name
// matched. Its id is matched's repository's digest name (repo@sha256:…)
// when the node lists one, else matched: never a name of another
// repository, which an image the node holds under several (a pull of the
// same image from another registry) may list first, and which goes when
// that repository's image is removed.
func image(img corev1.ContainerImage, matched string) sandbox.Image {
	out := sandbox.Image{Size: img.SizeBytes, OS: "linux", ID: matched}
	repo := repository(matched)
	for _, name := range img.Names {
		r, _, digest := strings.Cut(name, "@sha256:")
		if !digest {
			continue
		}
		out.RepoDigests = append(out.RepoDigests, name)
		if r == repo && !strings.Contains(out.ID, "@") {
			out.ID = name
		}
	}
	return out
}

// repository is ref without its tag or digest.
func repository(ref string) string {
	if r, _, ok := strings.Cut(ref, "@"); ok {
		return r
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i]
	}
	return ref
}

// candidates are the names a node may list ref under.
func candidates(ref string) []string {
	out := []string{ref}
	name := ref
	if !strings.Contains(name, "@") && !strings.HasPrefix(name, "sha256:") {
		if i := strings.LastIndex(name, ":"); i < 0 || strings.Contains(name[i:], "/") {
			name += ":latest"
			out = append(out, name)
		}
	}
	if strings.HasPrefix(name, "sha256:") {
		return out
	}
	first, _, _ := strings.Cut(name, "/")
	switch {
	case !strings.Contains(name, "/"):
		out = append(out, "docker.io/library/"+name)
	case !strings.ContainsAny(first, ".:") && first != "localhost":
		out = append(out, "docker.io/"+name)
	}
	return out
}
