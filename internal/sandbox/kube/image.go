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
			if slices.ContainsFunc(img.Names, func(name string) bool { return slices.Contains(want, name) }) {
				return image(img), nil
			}
		}
	}
	return sandbox.Image{}, fmt.Errorf("image %s: %w on %s (Pull has the kubelets pull it, or import it into each node's runtime)", ref, sandbox.ErrNotFound, d.placementNote())
}

// image is the description of a node's image.
func image(img corev1.ContainerImage) sandbox.Image {
	out := sandbox.Image{Size: img.SizeBytes, OS: "linux"}
	for _, name := range img.Names {
		if strings.HasPrefix(name, "sha256:") || strings.Contains(name, "@sha256:") {
			if out.ID == "" {
				out.ID = name
			}
			if strings.Contains(name, "@") {
				out.RepoDigests = append(out.RepoDigests, name)
			}
		}
	}
	if out.ID == "" && len(img.Names) > 0 {
		out.ID = img.Names[0]
	}
	return out
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
