package kube

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// startFailures are the reasons a container waits that it will not get
// over by waiting: Start fails with them at once.
var startFailures = map[string]bool{
	"ErrImageNeverPull": true, "InvalidImageName": true, "CreateContainerConfigError": true,
	"CreateContainerError": true, "RunContainerError": true, "ImagePullBackOff": true, "ErrImagePull": true,
}

// startTimeout is Options.StartTimeout's default: a Pod the scheduler
// cannot place stays Pending for ever. A Pod with the init container gets
// initTimeout more: the kubelet makes two containers, one after the other
// (each a copy of its image's layers with the native snapshotter here:
// 30-90 s apiece on the loaded shared cluster).
const (
	startTimeout = 2 * time.Minute
	initTimeout  = 2 * time.Minute
)

// Start creates the sandbox's Pod from its record and waits until its
// process runs (or has already exited). Starting a running sandbox is a
// no-op; an exited Pod left from the last run is replaced.
func (d *Driver) Start(ctx context.Context, id string) error {
	sec, err := d.record(ctx, "start sandbox", id)
	if err != nil {
		return err
	}
	s, err := recordSpec(sec)
	if err != nil {
		return err
	}
	pods := d.cs.CoreV1().Pods(d.ns)
	if p, err := pods.Get(ctx, id, metav1.GetOptions{}); err == nil {
		// Its container may have exited before the kubelet set the
		// Pod's phase: that Pod is done too.
		cs := containerStatus(p)
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed &&
			(cs == nil || cs.State.Terminated == nil) {
			// A paused one runs on, thawed, with its limit.
			if err := thaw(ctx, p); err != nil {
				return fmt.Errorf("start sandbox %s: thaw it: %w", id, err)
			}
			return limitPids(p, s.Limits.Pids, "")
		}
		if _, err := d.deletePod(ctx, id, 1); err != nil {
			return err
		}
	} else if !apierrors.IsNotFound(err) {
		return d.fail("start sandbox "+id, err)
	}
	node, err := d.checkPids(ctx, s.Limits.Pids)
	if err != nil {
		return fmt.Errorf("start sandbox %s: %w", id, err)
	}
	pod := d.pod(sec, s)
	if node != "" {
		// The hub bounds its processes there (setPids).
		pod.Spec.Affinity = pinnedTo(node)
	}
	if err := d.applyNetwork(ctx, pod, s.Network); err != nil {
		return fmt.Errorf("start sandbox %s: %w", id, err)
	}
	if d.bounded(claimName(id)) {
		// Never a Pod on the bare directory: that would be unbounded.
		if err := d.mountBounded(claimName(id)); err != nil {
			return fmt.Errorf("start sandbox %s: %w", id, err)
		}
	}
	if d.agentdImage != "" {
		if err := d.ensureTunnelPolicy(ctx); err != nil {
			return err
		}
		files, err := d.putFiles(ctx, sec, s)
		if err != nil {
			return err
		}
		d.withInit(pod, files)
	}
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return d.fail("start sandbox "+id, err)
	}
	ctx, cancel := context.WithTimeout(ctx, d.startTimeout)
	defer cancel()
	for {
		p, err := pods.Get(ctx, id, metav1.GetOptions{})
		if err != nil {
			return d.fail("start sandbox "+id, err)
		}
		cs := containerStatus(p)
		why := initFailure(p)
		switch {
		case cs != nil && (cs.State.Running != nil || cs.State.Terminated != nil):
			if cs.State.Running != nil {
				if err := limitPids(p, s.Limits.Pids, node); err != nil {
					cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
					defer cancel()
					_, _ = d.deletePod(cctx, id, 0)
					return err
				}
			}
			// Recorded as exited (killed, 137) from here on: a Pod
			// deleted behind the driver's back leaves a sandbox that ran
			// and stopped, as a container Docker killed, not one never
			// started. Stop records the real end.
			ann := exitedAnnotations(p)
			ann[annError] = ""
			return d.annotate(ctx, id, ann)
		case why != "" || cs != nil && cs.State.Waiting != nil && startFailures[cs.State.Waiting.Reason] && !runtimeSlow(cs.State.Waiting):
			if why == "" {
				why = cs.State.Waiting.Reason + ": " + cs.State.Waiting.Message
			}
			if p.Spec.NodeName != "" {
				why += " (on node " + p.Spec.NodeName + ")" // the scheduler's choice
			}
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			defer cancel()
			if _, err := d.deletePod(cctx, id, 0); err != nil {
				d.log.Warn("remove a pod that failed to start", zap.String("name", id), zap.Error(err))
			}
			_ = d.annotate(cctx, id, map[string]string{annError: why})
			return fmt.Errorf("start sandbox %s: %s", id, why)
		}
		if err := d.sleep(ctx); err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			defer cancel()
			_, _ = d.deletePod(cctx, id, 0)
			return fmt.Errorf("start sandbox %s: not running yet (%s): %w", id, podInfo(sec, p).Error, err)
		}
	}
}

// runtimeSlow reports a container the kubelet could not make within its
// runtime request timeout: it tries again, so Start waits on (a busy node
// copying a large image's layers, as the native snapshotter here does).
func runtimeSlow(w *corev1.ContainerStateWaiting) bool {
	return w.Reason == "CreateContainerError" && strings.Contains(w.Message, "context deadline exceeded")
}

// initFailure says why the Pod's init container failed (it cannot start,
// or it exited with an error); "" while it has not.
func initFailure(p *corev1.Pod) string {
	for _, ic := range p.Status.InitContainerStatuses {
		switch {
		case ic.State.Waiting != nil && startFailures[ic.State.Waiting.Reason] && !runtimeSlow(ic.State.Waiting):
			return "init container " + ic.Name + ": " + ic.State.Waiting.Reason + ": " + ic.State.Waiting.Message
		case ic.State.Terminated != nil && ic.State.Terminated.ExitCode != 0:
			t := ic.State.Terminated
			return fmt.Sprintf("init container %s: exit %d (%s): %s", ic.Name, t.ExitCode, t.Reason, strings.TrimSpace(t.Message))
		}
	}
	return ""
}

// deletePod deletes a Pod with a grace period of graceSecs (its processes
// get SIGTERM, SIGKILL after it) and waits until it is gone; it returns
// the last status it read. A missing Pod is not an error.
func (d *Driver) deletePod(ctx context.Context, name string, graceSecs int64) (*corev1.Pod, error) {
	// A frozen Pod's tasks take no signal, so the kubelet would wait on
	// them for ever: thawed first (Pause).
	if p, err := d.cs.CoreV1().Pods(d.ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		if err := thaw(ctx, p); err != nil {
			return nil, fmt.Errorf("delete pod %s: thaw it: %w", name, err)
		}
	}
	err := d.cs.CoreV1().Pods(d.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &graceSecs})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, d.fail("delete pod "+name, err)
	}
	return d.podGone(ctx, name)
}

// Stop deletes the sandbox's Pod with grace, rounded up to a second (the
// kubelet sends SIGTERM, SIGKILL once it has passed), waits until it is
// gone and records how it ended. The workspace claim stays. Stopping a
// sandbox without a Pod is a no-op.
func (d *Driver) Stop(ctx context.Context, id string, grace time.Duration) error {
	if _, err := d.record(ctx, "stop sandbox", id); err != nil {
		return err
	}
	secs := max(1, int64(math.Ceil(grace.Seconds())))
	last, err := d.deletePod(ctx, id, secs)
	if err != nil {
		return err
	}
	if last == nil {
		return nil // no Pod: created, or stopped already
	}
	return d.annotate(context.WithoutCancel(ctx), id, exitedAnnotations(last))
}

// Remove deletes the sandbox's Pod (its processes get a second), its
// workspace claim and volume, and its record. What is gone already is not
// an error: a claim left by an interrupted Remove goes too.
func (d *Driver) Remove(ctx context.Context, id string) error {
	p, err := d.cs.CoreV1().Pods(d.ns).Get(ctx, id, metav1.GetOptions{})
	switch {
	case err == nil && p.Labels[labelSandbox] != id:
		return fmt.Errorf("remove sandbox %s: pod %s is not a sandbox's", id, id)
	case err == nil:
		if _, err := d.deletePod(ctx, id, 1); err != nil {
			return err
		}
	case !apierrors.IsNotFound(err):
		return d.fail("remove sandbox "+id, err)
	}
	if c, err := d.cs.CoreV1().PersistentVolumeClaims(d.ns).Get(ctx, claimName(id), metav1.GetOptions{}); err == nil && c.Labels[labelSandbox] != id {
		return fmt.Errorf("remove sandbox %s: claim %s is not its workspace", id, c.Name)
	}
	if err := d.deleteVolume(ctx, claimName(id)); err != nil {
		return err
	}
	if err := d.deleteFiles(ctx, id); err != nil {
		return err
	}
	if _, err := d.record(ctx, "remove sandbox", id); errors.Is(err, sandbox.ErrNotFound) {
		return nil // gone, or a secret that is not a sandbox's
	} else if err != nil {
		return err
	}
	return d.deleteRecord(ctx, id)
}

// Inspect describes one sandbox.
func (d *Driver) Inspect(ctx context.Context, id string) (sandbox.Info, error) {
	sec, err := d.record(ctx, "inspect sandbox", id)
	if err != nil {
		return sandbox.Info{}, err
	}
	p, err := d.cs.CoreV1().Pods(d.ns).Get(ctx, id, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return recordInfo(sec), nil
	case err != nil:
		return sandbox.Info{}, d.fail("inspect sandbox "+id, err)
	}
	return withFreezer(podInfo(sec, p), p), nil
}

// List describes every sandbox that carries all of labels.
func (d *Driver) List(ctx context.Context, labels map[string]string) ([]sandbox.Info, error) {
	sel, rest := selector(labels)
	secs, err := d.cs.CoreV1().Secrets(d.ns).List(ctx, metav1.ListOptions{LabelSelector: sel, FieldSelector: "type=" + string(recordType)})
	if err != nil {
		return nil, d.fail("list sandboxes", err)
	}
	pods, err := d.cs.CoreV1().Pods(d.ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, d.fail("list sandbox pods", err)
	}
	byName := map[string]*corev1.Pod{}
	for i := range pods.Items {
		byName[pods.Items[i].Name] = &pods.Items[i]
	}
	infos := make([]sandbox.Info, 0, len(secs.Items))
	for i := range secs.Items {
		sec := &secs.Items[i]
		if sec.DeletionTimestamp != nil || !hasAll(allLabels(sec.ObjectMeta), rest) {
			continue
		}
		if p := byName[sec.Name]; p != nil {
			infos = append(infos, withFreezer(podInfo(sec, p), p))
		} else {
			infos = append(infos, recordInfo(sec))
		}
	}
	return infos, nil
}

// Volumes lists the workspace claims that carry every label in labels.
func (d *Driver) Volumes(ctx context.Context, labels map[string]string) ([]sandbox.Volume, error) {
	sel, rest := selector(labels)
	list, err := d.cs.CoreV1().PersistentVolumeClaims(d.ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, d.fail("list workspace claims", err)
	}
	var vols []sandbox.Volume
	for _, c := range list.Items {
		l := allLabels(c.ObjectMeta)
		if c.DeletionTimestamp != nil || c.Labels[labelSandbox] == "" || !hasAll(l, rest) {
			continue
		}
		vols = append(vols, sandbox.Volume{Name: c.Name, Labels: l})
	}
	return vols, nil
}

// RemoveVolume deletes a workspace claim (and its volume) whose sandbox is
// gone; one whose sandbox is still recorded is in use and refused. A
// missing claim is not an error.
func (d *Driver) RemoveVolume(ctx context.Context, name string) error {
	c, err := d.cs.CoreV1().PersistentVolumeClaims(d.ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return d.deleteVolume(ctx, name) // its volume may be left
	case err != nil:
		return d.fail("remove volume "+name, err)
	}
	owner := c.Labels[labelSandbox]
	if owner == "" {
		return fmt.Errorf("remove volume %s: not a sandbox's workspace", name)
	}
	{
		if _, err := d.record(ctx, "remove volume", owner); err == nil {
			return fmt.Errorf("remove volume %s: sandbox %s uses it", name, owner)
		} else if !errors.Is(err, sandbox.ErrNotFound) {
			return err
		}
	}
	return d.deleteVolume(ctx, name)
}

// deleteVolume deletes a workspace claim, waits until it is gone (its
// protection holds it while a Pod uses it), and then its hostPath volume
// and directory. What is missing is not an error.
func (d *Driver) deleteVolume(ctx context.Context, claim string) error {
	claims := d.cs.CoreV1().PersistentVolumeClaims(d.ns)
	err := claims.Delete(ctx, claim, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return d.fail("delete workspace claim "+claim, err)
	}
	for err == nil {
		if _, err = claims.Get(ctx, claim, metav1.GetOptions{}); err == nil {
			if serr := d.sleep(ctx); serr != nil {
				return fmt.Errorf("wait for claim %s to go: %w", claim, serr)
			}
		}
	}
	if !apierrors.IsNotFound(err) {
		return d.fail("read claim "+claim, err)
	}
	if d.hostDir == "" {
		return nil
	}
	pv := d.pvName(claim)
	err = d.cs.CoreV1().PersistentVolumes().Delete(ctx, pv, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return d.fail("delete workspace volume "+pv, err)
	}
	if err := d.releaseBounded(claim); err != nil {
		return err
	}
	if err := os.RemoveAll(d.hostDirOf(claim)); err != nil {
		return fmt.Errorf("remove the workspace of %s: %w", strings.TrimSuffix(claim, wsSuffix), err)
	}
	return nil
}
