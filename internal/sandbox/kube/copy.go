package kube

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync/atomic"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/loopfs"
)

// CopyRunningWorkspace copies the workspace of src into that of every dst
// (each created, never started) at one instant, while src keeps running:
// a bounded hostPath workspace (bounded.go) is frozen (FIFREEZE) for the
// copies, so every one is the same clean file system and the sandbox's
// processes only wait in their writes meanwhile; they keep their state.
// Kubernetes has no pause, so this is what the hub's fork of a running
// sandbox does instead. An unbounded hostPath directory cannot be frozen:
// a src that runs with one is refused (sandbox.ErrNotSupported), as are
// provisioned volumes.
func (d *Driver) CopyRunningWorkspace(ctx context.Context, src string, dsts []string) error {
	return d.copyWorkspaces(ctx, src, dsts, true)
}

// copyWorkspaces copies src's workspace into each of dsts'. A bounded
// source is frozen for all of them and copied as its image into a bounded
// destination of its size (sparse, within the kernel), else file by file
// from the frozen mount; an unbounded one is copied file by file, and
// refused when it runs and live is set.
func (d *Driver) copyWorkspaces(ctx context.Context, src string, dsts []string, live bool) (err error) {
	in, err := d.Inspect(ctx, src)
	if err != nil {
		return err
	}
	if d.hostDir == "" {
		if live && notRunning(in) != nil {
			return fmt.Errorf("copy the workspace of %s: %w: it runs, and its workspace is a claim of StorageClass %s, which the driver cannot freeze (Kubernetes has no pause): stop the sandbox first", src, sandbox.ErrNotSupported, d.class)
		}
		for _, dst := range dsts {
			if err := d.copyHelper(ctx, src, dst); err != nil {
				return err
			}
		}
		return nil
	}
	sClaim := claimName(src)
	if !d.bounded(sClaim) {
		if live && notRunning(in) != nil {
			return fmt.Errorf("copy the workspace of %s: %w: it runs, and its workspace is an unbounded hostPath directory, which cannot be frozen (Kubernetes has no pause): stop the sandbox first, or bound workspaces (agenthub serve --sandbox-workspace-max)", src, sandbox.ErrNotSupported)
		}
		for _, dst := range dsts {
			if err := d.copyTar(ctx, src, dst); err != nil {
				return err
			}
		}
		return nil
	}
	if err := d.mountBounded(sClaim); err != nil {
		return fmt.Errorf("copy the workspace of %s: %w", src, err)
	}
	thaw, err := loopfs.Freeze(d.hostDirOf(sClaim))
	if err != nil {
		return fmt.Errorf("copy the workspace of %s: %w", src, err)
	}
	defer func() {
		if terr := thaw(); terr != nil && err == nil {
			err = fmt.Errorf("copy the workspace of %s: %w", src, terr)
		}
	}()
	for _, dst := range dsts {
		ok, err := d.copyImage(ctx, src, dst)
		if err != nil {
			return err
		}
		if ok {
			d.log.Debug("workspace image copied", zap.String("from", src), zap.String("to", dst))
			continue
		}
		if err := d.copyTar(ctx, src, dst); err != nil {
			return err
		}
	}
	return nil
}

// copyImage copies the (frozen or unmounted) bounded workspace of src as
// its image into dst's, when dst's is bounded and of the same size: dst's
// is unmounted for the copy and mounted again after it. ok false (and
// nil): not such a pair, nothing changed.
func (d *Driver) copyImage(ctx context.Context, src, dst string) (ok bool, err error) {
	sClaim, dClaim := claimName(src), claimName(dst)
	if !d.bounded(dClaim) {
		return false, nil
	}
	sImg, _ := d.imageFiles(sClaim)
	dImg, dDev := d.imageFiles(dClaim)
	sFi, err1 := os.Stat(sImg)
	dFi, err2 := os.Stat(dImg)
	if err1 != nil || err2 != nil || sFi.Size() != dFi.Size() {
		return false, nil
	}
	in, err := d.Inspect(ctx, dst)
	if err != nil {
		return true, err
	}
	if err := neverRan(in); err != nil {
		return true, fmt.Errorf("copy a workspace into %s: %w", dst, err)
	}
	if err := d.unmountBounded(dClaim); err != nil {
		return true, fmt.Errorf("copy a workspace into %s: %w", dst, err)
	}
	defer func() {
		if merr := d.mountBounded(dClaim); merr != nil && err == nil {
			err = fmt.Errorf("copy a workspace into %s: %w", dst, merr)
		}
	}()
	loop := loopfs.LoopOf(dImg, dDev)
	if loop == "" {
		if loop, err = loopfs.Attach(d.loopControl, dImg, dDev); err != nil {
			return true, fmt.Errorf("copy a workspace into %s: %w", dst, err)
		}
	}
	if err := loopfs.CopyImage(ctx, sImg, dImg, loop, sFi.Size()); err != nil {
		return true, fmt.Errorf("copy workspace %s → %s: %w", src, dst, err)
	}
	return true, nil
}

// A copy between two claims (StorageClass workspaces) through two helper
// Pods streams every byte out of one through the API server to the hub
// and back in through the API server into the other. When one Pod can
// mount both claims, one helper does it within the node instead: cp -a
// from one mount to the other, nothing through the hub (copyShared). One
// Pod can when both volumes are ReadWriteMany, or when they are
// ReadWriteOnce and not in use on two different nodes (a sandbox's Pod
// holds its claim's volume on its node), and a node satisfies both
// volumes' node affinity (local or zonal volumes; a claim not bound yet
// has none to check, and the scheduler binds it for the helper). Anything
// else — a ReadWriteOncePod claim, volumes in use on two nodes, no node
// both may be on, a volume the hub may not read (persistentvolumes is
// granted for hostPath workspaces only, docs/deploy.md) — takes the two
// streams, which work across nodes and zones.

// copyStats counts the copies between claims by the way they went.
type copyStats struct {
	// streamOnly makes every copy take the two streams (tests).
	streamOnly bool
	// shared counts the copies one helper made within a node, streamed
	// those that went through the hub.
	shared, streamed atomic.Int64
}

// sharedCopy is what the copy helper runs: it empties the destination
// and copies the source's tree into it as the Docker driver's copy
// helper does: cp -a keeps modes, owners, symlinks (as links, never
// followed), hard links and modification times, the root directory's own
// included.
var sharedCopy = []string{"sh", "-c", `set -e; rm -rf /dst/* /dst/.[!.]* /dst/..?*; cp -a /src/. /dst/`}

// copyShared copies the workspace of src into that of dst (created, never
// run) in one helper Pod on node ("": the scheduler's) that mounts src's
// claim read-only at /src and dst's at /dst: dst's image, runtime and
// labels, owned by dst's record. The node is a node affinity, not the
// Pod's nodeName: the scheduler binds a claim that is not bound yet, which
// it never does for a Pod given its node.
func (d *Driver) copyShared(ctx context.Context, src, dst, node string) error {
	sec, s, err := d.helperRecord(ctx, "copy", dst)
	if err != nil {
		return err
	}
	pod, stop, err := d.runHelper(ctx, "copy", sec, s, node, []helperMount{
		{claimName(src), "/src", false}, {claimName(dst), "/dst", true},
	})
	if err != nil {
		return err
	}
	defer stop()
	return d.exec(ctx, pod, sharedCopy, nil, nil)
}

// sharedNode reports whether one helper Pod can mount the claims of src
// and dst together (see above), and on which node ("": any the scheduler
// picks); why, when it cannot, says why not. err is a failure to ask.
func (d *Driver) sharedNode(ctx context.Context, src, dst string) (node, why string, err error) {
	if d.copies.streamOnly {
		return "", "two streams asked for", nil
	}
	var pvs []*corev1.PersistentVolume
	var nodes []string
	rwx := true
	for _, id := range []string{src, dst} {
		c, err := d.cs.CoreV1().PersistentVolumeClaims(d.ns).Get(ctx, claimName(id), metav1.GetOptions{})
		if err != nil {
			return "", "", d.fail("copy workspace: claim "+claimName(id), err)
		}
		modes := c.Status.AccessModes
		if c.Status.Phase != corev1.ClaimBound || c.Spec.VolumeName == "" {
			// Not bound yet (a WaitForFirstConsumer class's before its
			// first Pod, or one just made): the scheduler binds it for
			// the helper, on a node the other volume may be on.
			modes = c.Spec.AccessModes
		} else {
			pv, err := d.cs.CoreV1().PersistentVolumes().Get(ctx, c.Spec.VolumeName, metav1.GetOptions{})
			if apierrors.IsForbidden(err) {
				return "", "the hub may not read volume " + c.Spec.VolumeName, nil
			}
			if err != nil {
				return "", "", d.fail("copy workspace: volume "+c.Spec.VolumeName, err)
			}
			pvs = append(pvs, pv)
		}
		if slices.Contains(modes, corev1.ReadWriteOncePod) {
			return "", "claim " + c.Name + " is ReadWriteOncePod", nil
		}
		rwx = rwx && slices.Contains(modes, corev1.ReadWriteMany)
		n, err := d.podNode(ctx, "copy workspace: pod", id)
		if err != nil {
			return "", "", err
		}
		if n != "" {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 2 && nodes[0] != nodes[1] && !rwx {
		return "", fmt.Sprintf("the ReadWriteOnce volumes are in use on nodes %s and %s", nodes[0], nodes[1]), nil
	}
	if len(nodes) > 0 {
		node = nodes[0]
	}
	if !slices.ContainsFunc(pvs, hasNodeAffinity) {
		return node, "", nil
	}
	list, err := d.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", "", d.fail("copy workspace: list nodes", err)
	}
	for i := range list.Items {
		n := &list.Items[i]
		if (node == "" || n.Name == node) && !slices.ContainsFunc(pvs, func(pv *corev1.PersistentVolume) bool { return !onNode(pv, n) }) {
			return node, "", nil
		}
	}
	if node != "" {
		return "", "node " + node + " does not satisfy both volumes' node affinity", nil
	}
	return "", "no node satisfies both volumes' node affinity", nil
}

func hasNodeAffinity(pv *corev1.PersistentVolume) bool {
	return pv.Spec.NodeAffinity != nil && pv.Spec.NodeAffinity.Required != nil
}

// onNode reports whether volume pv may be used on node n: its required
// node affinity's terms are ORed, a term's requirements ANDed, an empty
// term matches nothing (as the scheduler reads them).
func onNode(pv *corev1.PersistentVolume, n *corev1.Node) bool {
	if !hasNodeAffinity(pv) {
		return true
	}
	for _, t := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		if (len(t.MatchExpressions) > 0 || len(t.MatchFields) > 0) &&
			requirementsMatch(t.MatchExpressions, labels.Set(n.Labels)) &&
			requirementsMatch(t.MatchFields, labels.Set{"metadata.name": n.Name}) {
			return true
		}
	}
	return false
}

// requirementsMatch reports whether set satisfies every requirement of
// rs; one it cannot read does not match.
func requirementsMatch(rs []corev1.NodeSelectorRequirement, set labels.Set) bool {
	for _, r := range rs {
		var op selection.Operator
		switch r.Operator {
		case corev1.NodeSelectorOpIn:
			op = selection.In
		case corev1.NodeSelectorOpNotIn:
			op = selection.NotIn
		case corev1.NodeSelectorOpExists:
			op = selection.Exists
		case corev1.NodeSelectorOpDoesNotExist:
			op = selection.DoesNotExist
		case corev1.NodeSelectorOpGt:
			op = selection.GreaterThan
		case corev1.NodeSelectorOpLt:
			op = selection.LessThan
		default:
			return false
		}
		req, err := labels.NewRequirement(r.Key, op, r.Values)
		if err != nil || !req.Matches(set) {
			return false
		}
	}
	return true
}
