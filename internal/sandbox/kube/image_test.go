package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// An image's id is a name of the repository it was asked for: a node that
// holds the same image under another registry's name too (a pull of the
// base image from a registry) may list that name first, and it goes when
// that image is removed; a base image pinned to it then could not start.
func TestImageIDOfItsRepository(t *testing.T) {
	for _, tc := range []struct {
		names         []string
		matched, want string
	}{
		{[]string{"127.0.0.1:46489/acme/reg@sha256:b5", "ghcr.io/devdepot-ai/sandbox-base:1"}, "ghcr.io/devdepot-ai/sandbox-base:1", "ghcr.io/devdepot-ai/sandbox-base:1"},
		{[]string{"127.0.0.1:46489/acme/reg@sha256:b5", "docker.io/agentd-test/debian-slim@sha256:08", "docker.io/agentd-test/debian-slim:1"}, "docker.io/agentd-test/debian-slim:1", "docker.io/agentd-test/debian-slim@sha256:08"},
		{[]string{"127.0.0.1:46489/acme/reg@sha256:b5", "127.0.0.1:46489/acme/reg:v1"}, "127.0.0.1:46489/acme/reg:v1", "127.0.0.1:46489/acme/reg@sha256:b5"},
		{[]string{"127.0.0.1:46489/acme/reg@sha256:b5"}, "127.0.0.1:46489/acme/reg@sha256:b5", "127.0.0.1:46489/acme/reg@sha256:b5"},
		{[]string{"agentd.local/pause:1"}, "agentd.local/pause:1", "agentd.local/pause:1"},
	} {
		got := image(corev1.ContainerImage{Names: tc.names}, tc.matched)
		if got.ID != tc.want {
			t.Errorf("image %v found as %s: id %s, want %s", tc.names, tc.matched, got.ID, tc.want)
		}
	}
	for ref, want := range map[string]string{
		"127.0.0.1:5000/a/b:v1": "127.0.0.1:5000/a/b", "127.0.0.1:5000/a/b": "127.0.0.1:5000/a/b",
		"a/b@sha256:00": "a/b", "ghcr.io/x/y:1": "ghcr.io/x/y", "busybox": "busybox",
	} {
		if got := repository(ref); got != want {
			t.Errorf("repository(%s) = %s, want %s", ref, got, want)
		}
	}
}
