package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// On Kubernetes the kubelet pulls, through its container runtime, when a
// Pod needs an image; nothing in the API pulls on its own. So Pull makes
// the kubelets pull: on every node that takes Pods, a pull Pod of ref with
// imagePullPolicy Always, pinned to that node (nodeName), the sandbox's
// hardening (uid 1000, read-only root, no capabilities, the deny-all
// NetworkPolicy) and a command no image holds (pullCommand): once the
// image is there the runtime fails to start it (StartError), so the
// image's own code never runs, and nothing of agentd need be mounted. The
// container's status then names the image the node holds (imageID); the
// driver deletes the Pod and waits until the node lists the image in its
// status, where Image (and Create) read it.
//
// The pull is the node's: its runtime's registry configuration applies,
// not the hub's. A registry that needs TLS trust in a private CA, plain
// http on a name that is not loopback, or credentials, is configured on
// every node (containerd's hosts.toml; docs/kubernetes.md, "Images and
// pulls"); the driver pulls anonymously (no imagePullSecrets), as the
// hub's registry checks do, and its errors say so.

const (
	// labelPull marks a pull Pod.
	labelPull = annPrefix + "pull"
	// pullContainer is a pull Pod's container.
	pullContainer = "pull"
	// pullCommand is a path nothing can hold (/dev/null is no
	// directory): the runtime fails to start the container, after the
	// pull, without running anything of the image.
	pullCommand = "/dev/null/agentd-pull"
	// pullTimeout bounds a Pull (a large image on a slow registry).
	pullTimeout = 10 * time.Minute
	// listedTimeout bounds the wait, after a pull, for the node to list
	// the image in its status (the kubelet refreshes its image list every
	// 30 s and reports it with its status, every 10 s).
	listedTimeout = 2 * time.Minute
)

// pullFailures are the reasons a pull Pod's container waits with that end
// the pull: the kubelet's message says why.
var pullFailures = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true}

// Pull makes every node that takes Pods hold ref (repo:tag or
// repo@sha256:…), pulled by its kubelet, and returns the image as Image
// reports it. A failed pull returns the kubelet's message, with what the
// node's operator can do about it; the pull Pods are deleted whatever
// happens.
func (d *Driver) Pull(ctx context.Context, ref string) (sandbox.Image, error) {
	ctx, cancel := context.WithTimeout(ctx, pullTimeout)
	defer cancel()
	nodes, err := d.pullNodes(ctx)
	if err != nil {
		return sandbox.Image{}, fmt.Errorf("pull %s: %w", ref, err)
	}
	if err := d.ensurePolicy(ctx, policies(NetworkNone, nil)[0]); err != nil {
		return sandbox.Image{}, fmt.Errorf("pull %s: %w", ref, err)
	}
	start := time.Now()
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, node := range nodes {
		wg.Go(func() { errs[i] = d.pullOn(ctx, ref, node) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return sandbox.Image{}, fmt.Errorf("pull %s: %w", ref, err)
	}
	pulled := time.Since(start)
	img, err := d.listed(ctx, ref)
	if err != nil {
		return sandbox.Image{}, fmt.Errorf("pull %s: %w", ref, err)
	}
	d.log.Info("pulled", zap.String("image", ref), zap.String("id", img.ID), zap.Int("nodes", len(nodes)),
		zap.Duration("pull", pulled), zap.Duration("listed", time.Since(start)-pulled))
	return img, nil
}

// pullNodes are the nodes that take Pods: Ready, not cordoned.
func (d *Driver) pullNodes(ctx context.Context) ([]string, error) {
	list, err := d.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, d.fail("list nodes", err)
	}
	var out []string
	for _, n := range list.Items {
		if n.Spec.Unschedulable {
			continue
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				out = append(out, n.Name)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no node is ready to take Pods (of %d): %w", len(list.Items), sandbox.ErrUnavailable)
	}
	return out, nil
}

// pullOn has node's kubelet pull ref through a pull Pod, deleted (and
// waited for until gone) before it returns.
func (d *Driver) pullOn(ctx context.Context, ref, node string) error {
	p := pullPod(d.podSecurity(), ref, node)
	if _, err := d.cs.CoreV1().Pods(d.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return d.fail("create pull pod on node "+node, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if _, err := d.deletePod(cctx, p.Name, 0); err != nil {
			d.log.Warn("remove a pull pod", zap.String("pod", p.Name), zap.Error(err))
		}
	}()
	for {
		cur, err := d.cs.CoreV1().Pods(d.ns).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return d.fail("read pull pod "+p.Name, err)
		}
		var cs *corev1.ContainerStatus
		if len(cur.Status.ContainerStatuses) == 1 {
			cs = &cur.Status.ContainerStatuses[0]
		}
		switch {
		case cs != nil && cs.ImageID != "" && (cs.State.Running != nil || cs.State.Terminated != nil):
			return nil // made, so pulled
		case cs != nil && cs.State.Waiting != nil && pullFailures[cs.State.Waiting.Reason]:
			return pullError(node, cs.State.Waiting)
		case cs != nil && cs.State.Waiting != nil && startFailures[cs.State.Waiting.Reason] && !runtimeSlow(cs.State.Waiting):
			return nil // the image is there; making the container failed
		case cur.Status.Phase == corev1.PodFailed && cs == nil:
			return fmt.Errorf("node %s refused the pull pod: %s %s", node, cur.Status.Reason, cur.Status.Message)
		}
		if err := d.sleep(ctx); err != nil {
			return fmt.Errorf("node %s: not pulled yet (%s): %w", node, pullWhy(cur, cs), err)
		}
	}
}

// pullPod is the Pod that has node's kubelet pull ref.
func pullPod(sec *corev1.PodSecurityContext, ref, node string) *corev1.Pod {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	deadline := int64(pullTimeout / time.Second)
	small := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: quantity(16 << 20)}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "agentd-pull-" + hex.EncodeToString(b),
			// The deny-all NetworkPolicy selects it (it runs nothing).
			Labels:      map[string]string{sandbox.LabelManaged: "1", labelPull: "1"},
			Annotations: map[string]string{labelPull: ref},
		},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  ptr(false),
			EnableServiceLinks:            ptr(false),
			TerminationGracePeriodSeconds: ptr(int64(0)),
			ActiveDeadlineSeconds:         &deadline,
			SecurityContext:               sec,
			Containers: []corev1.Container{{
				Name:            pullContainer,
				Image:           ref,
				ImagePullPolicy: corev1.PullAlways,
				Command:         []string{pullCommand},
				Resources:       corev1.ResourceRequirements{Limits: small, Requests: small},
				SecurityContext: containerSecurity(),
			}},
		},
	}
}

// pullWhy says where a pull Pod is, for a timeout's message.
func pullWhy(p *corev1.Pod, cs *corev1.ContainerStatus) string {
	if cs != nil && cs.State.Waiting != nil {
		return cs.State.Waiting.Reason + ": " + cs.State.Waiting.Message
	}
	return podWhy(p)
}

// pullError is the kubelet's reason a pull failed, with what the node's
// operator can do about it when the message shows.
func pullError(node string, w *corev1.ContainerStateWaiting) error {
	msg := w.Message
	var hint string
	switch {
	case strings.Contains(msg, "server gave HTTP response to HTTPS client"),
		strings.Contains(msg, "x509:"), strings.Contains(msg, "tls: "):
		hint = "the node's container runtime does not trust this registry (plain http or a private CA): configure it on every node (containerd's hosts.toml; docs/kubernetes.md, Images and pulls)"
	case strings.Contains(msg, "no such host"):
		hint = "the node cannot resolve the registry's name: nodes resolve registries themselves, the hub's resolver does not apply"
	case strings.Contains(msg, "401 Unauthorized"), strings.Contains(msg, "403 Forbidden"),
		strings.Contains(msg, "authorization failed"), strings.Contains(msg, "insufficient_scope"):
		hint = "the driver pulls anonymously: make the image public, or give the nodes' runtime the registry's credentials"
	}
	if hint != "" {
		return fmt.Errorf("node %s: %s: %s (%s)", node, w.Reason, msg, hint)
	}
	return fmt.Errorf("node %s: %s: %s", node, w.Reason, msg)
}

// listed waits until a node lists ref in its status, and describes it.
func (d *Driver) listed(ctx context.Context, ref string) (sandbox.Image, error) {
	ctx, cancel := context.WithTimeout(ctx, listedTimeout)
	defer cancel()
	for {
		img, err := d.Image(ctx, ref)
		if !errors.Is(err, sandbox.ErrNotFound) {
			return img, err
		}
		// Not every poll: a node's status changes every 10 s at most.
		select {
		case <-time.After(max(d.poll, time.Second)):
		case <-ctx.Done():
			return sandbox.Image{}, fmt.Errorf("pulled, but no node lists the image in its status yet (the kubelet's image list lags up to 40 s; a node lists its 50 largest images only, unless its kubelet's nodeStatusMaxImages is -1): %w", ctx.Err())
		}
	}
}
