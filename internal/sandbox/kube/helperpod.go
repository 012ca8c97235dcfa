package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/wstar"
)

// A workspace on a provisioned volume (Options.StorageClass, no
// HostPathDir) is somewhere the hub cannot read: on another node, behind
// a CSI driver. Its export, import and copy go through a helper Pod: the
// sandbox's image, the claim its only volume (a copy's: both claims, when
// one Pod can mount them, copy.go), no network (it carries the sandbox's
// labels, so the deny-all policy applies), running sleep; the driver
// streams a tar through exec (client-go's websocket executor, SPDY when
// the API server does not upgrade to it). The helper is deleted by name
// when the call ends, whatever happened, and waited for until gone; should
// the hub die first, the kubelet ends it at its deadline and Remove takes
// it with the record (its owner).
//
// The helper runs as root with only the capabilities that read every file
// and restore owners and modes (helperSecurity): a workspace holds files
// its sandbox made unreadable to uid 1000 (mode 000) and, copied from
// another, files of other owners, which the Docker driver's export (the
// engine's archive API) and copy (cp -a as root) keep. It runs no code of
// the sandbox's: sleep, and the driver's fixed commands (tar, sh, rm, cp)
// from the image's read-only root, never anything from the workspace; the
// root fs is read-only, escalation off, seccomp RuntimeDefault, no token,
// no network.
//
// The tar inside is the image's (GNU tar): out, it tars the workspace and
// wstar.Rewrite makes that the snapshot export format (no owners); in, it
// extracts what wstar.Own let through: relative names without "..",
// directories, files and symlinks only, every entry uid 1000's (as the
// Docker driver's import), a stream with the tar's end marker (a cut
// stream fails the call whatever tar made of it). GNU tar extracts
// symlinks that point out (absolute, or climbing with "..") as
// placeholders until the end, so no later entry is written through them;
// and were one written through a symlink anyway, it is in a Pod whose only
// writable volume is that workspace, under a read-only root.

const (
	// helperContainer is a helper Pod's container.
	helperContainer = "workspace"
	// helperDeadline bounds a helper Pod's life should the driver never
	// delete it (activeDeadlineSeconds; its sleep ends then too).
	helperDeadline = 6 * time.Hour
	// labelHelper marks a helper Pod with its call: export, import,
	// copy-from, copy-to, own (Create's chown of a new claim's root).
	labelHelper = annPrefix + "workspace-helper"
	// helperStartTimeout bounds the wait for a helper Pod to run: longer
	// than a sandbox's Start (startTimeout), since a call that needs one
	// has no Pod to fall back on and a busy node starts Pods slowly.
	helperStartTimeout = 5 * time.Minute
	// stderrMax is how much of a helper command's stderr an error quotes.
	stderrMax = 4 << 10
)

// The helper's commands.
var (
	// tarOut tars the workspace: PAX headers (times to the nanosecond),
	// hard links stored as files, no owner names.
	tarOut = []string{"tar", "-C", sandbox.WorkspaceDir, "--format=posix", "--hard-dereference", "--numeric-owner", "-cf", "-", "."}
	// tarIn extracts into the workspace: the stream's modes, times and
	// numeric owners (wstar.Own made them 1000:1000), a file that exists
	// already an error (as wstar.Extract's). The volume's root keeps its
	// metadata: wstar.Own leaves the root's entry out.
	tarIn = []string{"tar", "-C", sandbox.WorkspaceDir, "-x", "-f", "-", "--same-owner", "--numeric-owner", "--same-permissions", "--keep-old-files"}
	// replaceIn empties the workspace first (CopyWorkspace replaces it).
	replaceIn = append([]string{"sh", "-c", `set -e; rm -rf /workspace/* /workspace/.[!.]* /workspace/..?*; exec "$@"`, "sh"}, tarIn...)
)

// helperMount is a claim a helper Pod mounts, at path, read-only unless
// write.
type helperMount struct {
	claim, path string
	write       bool
}

// startHelper makes a helper Pod with sandbox id's workspace claim
// (read-only unless write), waits until it runs and returns its name and
// the func that deletes it (call it, always). A read of a sandbox whose
// Pod exists runs on that Pod's node: a ReadWriteOnce volume is attached
// there.
func (d *Driver) startHelper(ctx context.Context, op, id string, write bool) (string, func(), error) {
	sec, s, err := d.helperRecord(ctx, op, id)
	if err != nil {
		return "", nil, err
	}
	node, err := d.podNode(ctx, op+" the workspace of "+id, id)
	if err != nil {
		return "", nil, err
	}
	return d.runHelper(ctx, op, sec, s, node, []helperMount{{claimName(id), sandbox.WorkspaceDir, write}})
}

// ownWorkspace makes the root of sandbox sec's new workspace claim (a
// provisioned volume's root is root's) the sandbox user's, as Docker's
// volumes and the hostPath workspaces are, through a helper Pod that may
// chown. Once: what the agent makes below it is its own, and the kubelet
// is never asked to change owners (no fsGroup, podSecurity).
func (d *Driver) ownWorkspace(ctx context.Context, sec *corev1.Secret, s storedSpec) error {
	pod, stop, err := d.runHelper(ctx, "own", sec, s, "", []helperMount{{claimName(sec.Name), sandbox.WorkspaceDir, true}})
	if err != nil {
		return err
	}
	defer stop()
	owner := strconv.Itoa(uid) + ":" + strconv.Itoa(gid)
	if err := d.exec(ctx, pod, []string{"chown", owner, sandbox.WorkspaceDir}, nil, nil); err != nil {
		return fmt.Errorf("make the workspace of %s the sandbox user's: %w", sec.Name, err)
	}
	return nil
}

// helperRecord is sandbox id's record and spec.
func (d *Driver) helperRecord(ctx context.Context, op, id string) (*corev1.Secret, storedSpec, error) {
	sec, err := d.record(ctx, op+" the workspace of", id)
	if err != nil {
		return nil, storedSpec{}, err
	}
	s, err := recordSpec(sec)
	return sec, s, err
}

// podNode is the node of sandbox id's Pod, "" when it has none.
func (d *Driver) podNode(ctx context.Context, what, id string) (string, error) {
	p, err := d.cs.CoreV1().Pods(d.ns).Get(ctx, id, metav1.GetOptions{})
	switch {
	case err == nil:
		return p.Spec.NodeName, nil
	case apierrors.IsNotFound(err):
		return "", nil
	default:
		return "", d.fail(what, err)
	}
}

// runHelper makes a helper Pod for sandbox sec (spec s) on node ("": the
// scheduler's choice) with mounts, waits until it runs and returns its
// name and the func that deletes it (call it, always).
func (d *Driver) runHelper(ctx context.Context, op string, sec *corev1.Secret, s storedSpec, node string, mounts []helperMount) (string, func(), error) {
	id := sec.Name
	if err := d.ensurePolicy(ctx, policies(NetworkNone, nil)[0]); err != nil { // no traffic in or out
		return "", nil, err
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	p := d.helperPod(sec, s, id+"-ws-"+hex.EncodeToString(b), op, node, mounts)
	if _, err := d.cs.CoreV1().Pods(d.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return "", nil, d.fail(op+" the workspace of "+id+": create helper pod", err)
	}
	stop := func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if _, err := d.deletePod(cctx, p.Name, 0); err != nil {
			d.log.Warn("remove a workspace helper pod", zap.String("pod", p.Name), zap.Error(err))
		}
	}
	if err := d.awaitHelper(ctx, p.Name); err != nil {
		stop()
		return "", nil, fmt.Errorf("%s the workspace of %s: %w", op, id, err)
	}
	return p.Name, stop, nil
}

// helperPod is the helper Pod name for sandbox sec's workspace, with the
// claims of mounts (the first volume named "workspace", the rest
// "workspace-1", …).
func (d *Driver) helperPod(sec *corev1.Secret, s storedSpec, name, op, node string, mounts []helperMount) *corev1.Pod {
	meta := objectMeta(name, allLabels(sec.ObjectMeta))
	meta.Labels[labelSandbox] = sec.Name
	meta.Labels[labelHelper] = op
	meta.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Secret", Name: sec.Name, UID: sec.UID}}
	deadline := int64(helperDeadline / time.Second)
	write := false
	var vols []corev1.Volume
	var vms []corev1.VolumeMount
	for i, m := range mounts {
		v := "workspace"
		if i > 0 {
			v += "-" + strconv.Itoa(i)
		}
		write = write || m.write
		vms = append(vms, corev1.VolumeMount{Name: v, MountPath: m.path, ReadOnly: !m.write})
		vols = append(vols, corev1.Volume{Name: v, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: m.claim, ReadOnly: !m.write},
		}})
	}
	pod, ctr := helperSecurity(write)
	p := &corev1.Pod{
		ObjectMeta: meta,
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  ptr(false),
			EnableServiceLinks:            ptr(false),
			TerminationGracePeriodSeconds: ptr(int64(0)),
			ActiveDeadlineSeconds:         &deadline,
			NodeName:                      node,
			SecurityContext:               pod,
			Containers: []corev1.Container{{
				Name:            helperContainer,
				Image:           s.Image,
				ImagePullPolicy: corev1.PullNever,
				Command:         []string{"sleep", strconv.FormatInt(deadline, 10)},
				WorkingDir:      "/",
				VolumeMounts:    vms,
				Resources:       resources(s.Limits),
				SecurityContext: ctr,
			}},
			Volumes: vols,
		},
	}
	if s.Runtime != "" {
		p.Spec.RuntimeClassName = &s.Runtime // a gVisor sandbox's workspace is read under gVisor
	}
	// Placed as the sandbox's Pods are: with no Pod to follow, the
	// scheduler puts the helper where its claim's volume is, among them.
	d.place(&p.Spec)
	if len(mounts) > 1 && node != "" { // a copy's: through the scheduler (copyShared)
		p.Spec.NodeName = ""
		p.Spec.Affinity = pinnedTo(node)
	}
	return p
}

// helperSecurity is a helper Pod's security: root, for the capabilities
// that read every file (DAC_OVERRIDE) and, when it writes, restore owners
// and modes (CHOWN; FOWNER: modes and times of files it does not own;
// FSETID: a setgid bit on a file of another group) — what tar -x and cp -a
// as root use, and nothing else: not DAC_READ_SEARCH, which DAC_OVERRIDE
// covers for reading and which would let open_by_handle_at through seccomp
// (a way out of a container) and put the Pod outside the "baseline" Pod
// Security level. The sandbox's other hardening stays (hardening.go): no
// escalation, a read-only root, seccomp RuntimeDefault. No fsGroup: root
// needs no group, and the kubelet would change the group and modes of
// every file on a volume that supports it, which the helper is there to
// keep.
func helperSecurity(write bool) (*corev1.PodSecurityContext, *corev1.SecurityContext) {
	caps := []corev1.Capability{"DAC_OVERRIDE"}
	if write {
		caps = append(caps, "CHOWN", "FOWNER", "FSETID")
	}
	seccomp := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	return &corev1.PodSecurityContext{RunAsUser: ptr(int64(0)), RunAsGroup: ptr(int64(0)), RunAsNonRoot: ptr(false), SeccompProfile: seccomp},
		&corev1.SecurityContext{
			RunAsUser: ptr(int64(0)), RunAsGroup: ptr(int64(0)), RunAsNonRoot: ptr(false),
			Privileged: ptr(false), AllowPrivilegeEscalation: ptr(false), ReadOnlyRootFilesystem: ptr(true),
			Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: caps},
			SeccompProfile: seccomp,
		}
}

// awaitHelper waits until helper Pod name's container runs (at most
// helperStartTimeout); it fails at once when the container cannot start.
func (d *Driver) awaitHelper(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, helperStartTimeout)
	defer cancel()
	for {
		p, err := d.cs.CoreV1().Pods(d.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return d.fail("helper pod "+name, err)
		}
		var cs *corev1.ContainerStatus
		if len(p.Status.ContainerStatuses) == 1 {
			cs = &p.Status.ContainerStatuses[0]
		}
		switch {
		case cs != nil && cs.State.Running != nil:
			return nil
		case cs != nil && cs.State.Terminated != nil:
			return fmt.Errorf("helper pod %s: its container ended: %s %s", name, cs.State.Terminated.Reason, cs.State.Terminated.Message)
		case cs != nil && cs.State.Waiting != nil && startFailures[cs.State.Waiting.Reason] &&
			!strings.Contains(cs.State.Waiting.Message, "context deadline exceeded"): // a busy runtime: the kubelet retries
			return fmt.Errorf("helper pod %s: %s: %s (on node %s)", name, cs.State.Waiting.Reason, cs.State.Waiting.Message, p.Spec.NodeName)
		case p.Status.Phase == corev1.PodFailed:
			return fmt.Errorf("helper pod %s failed: %s %s", name, p.Status.Reason, p.Status.Message)
		}
		if err := d.sleep(ctx); err != nil {
			return fmt.Errorf("helper pod %s: not running yet (%s): %w", name, podWhy(p), err)
		}
	}
}

// exec runs cmd in helper Pod pod with stdin and stdout (either nil: not
// attached), and fails when it exits other than 0, quoting its stderr.
func (d *Driver) exec(ctx context.Context, pod string, cmd []string, stdin io.Reader, stdout io.Writer) error {
	req := d.cs.CoreV1().RESTClient().Post().Namespace(d.ns).Resource("pods").Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: helperContainer, Command: cmd, Stdin: stdin != nil, Stdout: stdout != nil, Stderr: true,
		}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(d.cfg, "GET", req.URL().String())
	if err != nil {
		return fmt.Errorf("exec in %s: %w", pod, err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(d.cfg, "POST", req.URL())
	if err != nil {
		return fmt.Errorf("exec in %s: %w", pod, err)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return fmt.Errorf("exec in %s: %w", pod, err)
	}
	var stderr headBuffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: &stderr})
	if err != nil {
		if msg := strings.TrimSpace(string(stderr.b)); msg != "" {
			return fmt.Errorf("%s in helper pod %s: %w: %s", cmd[0], pod, err, msg)
		}
		return d.fail(cmd[0]+" in helper pod "+pod, err)
	}
	return nil
}

// headBuffer keeps the first stderrMax bytes written to it.
type headBuffer struct{ b []byte }

func (h *headBuffer) Write(p []byte) (int, error) {
	h.b = append(h.b, p[:min(len(p), stderrMax-len(h.b))]...)
	return len(p), nil
}

// tarFrom writes the workspace of helper Pod pod to w in the snapshot
// export format.
func (d *Driver) tarFrom(ctx context.Context, pod string, w io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := d.exec(ctx, pod, tarOut, nil, pw)
		pw.CloseWithError(err) // nil: EOF
		done <- err
	}()
	err := wstar.Rewrite(pr, w)
	if err != nil {
		cancel() // the tar stops when nothing reads it
	} else {
		_, _ = io.Copy(io.Discard, pr) // tar's padding after its end marker
	}
	pr.CloseWithError(errTarEnded)
	if xerr := <-done; err == nil {
		err = xerr
	}
	return err
}

// eofReader ends at its reader's first error: the executor would log
// the error (Own's, which the call returns) and then end the tar's input
// all the same.
type eofReader struct{ r io.Reader }

func (e eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil {
		err = io.EOF
	}
	return n, err
}

// errTarEnded is what a pipe's other end gets once the tar is done.
var errTarEnded = errors.New("the tar in the helper pod ended")

// tarInto extracts the snapshot export stream r into the workspace of
// helper Pod pod with cmd (tarIn or replaceIn), after wstar.Own's checks.
// A stream that fails them fails the call, whatever the tar made of its
// cut input.
func (d *Driver) tarInto(ctx context.Context, pod string, cmd []string, r io.Reader) error {
	pr, pw := io.Pipe()
	owned := make(chan error, 1)
	go func() {
		err := wstar.Own(r, pw, uid, gid)
		pw.CloseWithError(err)
		owned <- err
	}()
	err := d.exec(ctx, pod, cmd, eofReader{pr}, nil)
	pr.CloseWithError(errTarEnded) // unblocks Own when the tar stopped reading
	if oerr := <-owned; oerr != nil && (err == nil || !errors.Is(oerr, errTarEnded)) {
		return oerr
	}
	return err
}

// exportHelper is ExportWorkspace on a provisioned volume: the sandbox in
// any state, as the Docker engine's archive API reads a running
// container's (a running sandbox's tree may change under the tar).
func (d *Driver) exportHelper(ctx context.Context, id string) (io.ReadCloser, error) {
	pod, stop, err := d.startHelper(ctx, "export", id, false)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	go func() {
		defer stop()
		err := d.tarFrom(ctx, pod, pw)
		if err != nil {
			err = fmt.Errorf("export the workspace of %s: %w", id, err)
		}
		pw.CloseWithError(err)
	}()
	return pr, nil
}

// importHelper is ImportWorkspace on a provisioned volume.
func (d *Driver) importHelper(ctx context.Context, id string, r io.Reader) error {
	in, err := d.Inspect(ctx, id)
	if err != nil {
		return err
	}
	if err := neverRan(in); err != nil {
		return fmt.Errorf("import the workspace of %s: %w", id, err)
	}
	pod, stop, err := d.startHelper(ctx, "import", id, true)
	if err != nil {
		return err
	}
	defer stop()
	if err := d.tarInto(ctx, pod, tarIn, r); err != nil {
		return fmt.Errorf("import the workspace of %s: %w", id, err)
	}
	return nil
}

// copyHelper is CopyWorkspace on provisioned volumes: one helper Pod
// that mounts both claims and copies within the node when one Pod can
// (copy.go), else a helper Pod for each workspace (they may be on
// different nodes), the tar streamed from one through the driver into the
// other, as an export into an import (every entry the sandbox user's).
func (d *Driver) copyHelper(ctx context.Context, src, dst string) error {
	if _, err := d.Inspect(ctx, src); err != nil {
		return err
	}
	in, err := d.Inspect(ctx, dst)
	if err != nil {
		return err
	}
	if err := neverRan(in); err != nil {
		return fmt.Errorf("copy workspace %s → %s: %w", src, dst, err)
	}
	node, why, err := d.sharedNode(ctx, src, dst)
	if err != nil {
		return err
	}
	if why == "" {
		if err := d.copyShared(ctx, src, dst, node); err != nil {
			return fmt.Errorf("copy workspace %s → %s: %w", src, dst, err)
		}
		d.copies.shared.Add(1)
		return nil
	}
	d.log.Debug("workspace copy streamed through the hub", zap.String("from", src), zap.String("to", dst), zap.String("why", why))
	if err := d.copyStreams(ctx, src, dst); err != nil {
		return fmt.Errorf("copy workspace %s → %s: %w", src, dst, err)
	}
	d.copies.streamed.Add(1)
	return nil
}

// copyStreams copies src's workspace into dst's through two helper Pods.
func (d *Driver) copyStreams(ctx context.Context, src, dst string) error {
	from, stopFrom, err := d.startHelper(ctx, "copy-from", src, false)
	if err != nil {
		return err
	}
	defer stopFrom()
	to, stopTo, err := d.startHelper(ctx, "copy-to", dst, true)
	if err != nil {
		return err
	}
	defer stopTo()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := d.tarFrom(ctx, from, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	err = d.tarInto(ctx, to, replaceIn, pr)
	pr.CloseWithError(errors.New("copy ended"))
	if xerr := <-done; xerr != nil && err == nil {
		err = xerr
	}
	return err
}
