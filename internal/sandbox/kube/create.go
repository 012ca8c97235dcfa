package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// The sandbox user's numeric ids; sandbox.ContainerUser is "uid:gid".
const (
	uid = 1000
	gid = 1000
)

// cleanupTimeout bounds the removals that undo a failed Create; they run
// even when the caller's context is done.
const cleanupTimeout = 30 * time.Second

// validate refuses a spec the driver cannot carry out exactly; public is
// nil when network public is allowed (the cluster enforces NetworkPolicy),
// else why not.
func validate(s sandbox.Spec, public error) error {
	var errs []error
	if msgs := validation.IsDNS1123Label(s.Name); len(msgs) > 0 || len(s.Name)+len(wsSuffix) > validation.DNS1123LabelMaxLength {
		errs = append(errs, fmt.Errorf("name %q is not a DNS label of at most %d characters: %s",
			s.Name, validation.DNS1123LabelMaxLength-len(wsSuffix), strings.Join(msgs, "; ")))
	}
	if s.Image == "" {
		errs = append(errs, errors.New("no image"))
	}
	if len(s.Cmd) == 0 {
		errs = append(errs, errors.New("no command"))
	}
	if err := validNetwork(s.Network); err != nil {
		// A Pod always has the cluster's network; a sandbox's is what
		// its NetworkPolicies allow (netpol.go), which the cluster's CNI
		// enforces, or not.
		errs = append(errs, err)
	} else if s.Network == NetworkPublic && public != nil {
		errs = append(errs, public)
	}
	for _, p := range []struct{ name, dir string }{
		{"agentd host dir", s.AgentdHostDir},
		{"hub socket host dir", s.HubSocketHostDir},
		{"key host dir", s.KeyHostDir},
		{"CA host dir", s.CAHostDir},
	} {
		if p.dir != "" && !filepath.IsAbs(p.dir) {
			errs = append(errs, fmt.Errorf("%s %q is not absolute", p.name, p.dir))
		}
	}
	if s.Home != "" && (path.Clean(s.Home) != s.Home || !strings.HasPrefix(s.Home, sandbox.WorkspaceDir+"/")) {
		errs = append(errs, fmt.Errorf("home %q is not a clean path under %s", s.Home, sandbox.WorkspaceDir))
	}
	for _, e := range s.Env {
		k, _, ok := strings.Cut(e, "=")
		if !ok || len(validation.IsEnvVarName(k)) > 0 {
			errs = append(errs, fmt.Errorf("environment entry %q is not KEY=VALUE with a valid name", e))
		}
	}
	l := s.Limits
	if !(l.CPUs > 0) || l.MemoryBytes <= 0 || l.Pids <= 0 || l.TmpBytes <= 0 || l.HomeBytes <= 0 {
		errs = append(errs, fmt.Errorf("limits must all be positive: %+v", l))
	}
	return errors.Join(errs...)
}

// Create records the sandbox (a Secret holding its spec and environment)
// and makes its workspace claim, bound and owned by uid 1000 before
// anything runs; no Pod runs until Start. The image must be on the
// cluster's nodes (ErrNotFound otherwise), every node must bound a Pod's
// processes to at most the spec's (podPidsLimit) unless the hub runs on a
// node (its Pods then run there, with the spec's limit: checkPids), and
// the name must be free. When it fails, it removes what it made.
func (d *Driver) Create(ctx context.Context, s sandbox.Spec) (id string, err error) {
	var public error
	if s.Network == NetworkPublic {
		public = d.publicAllowed(ctx)
	}
	if err := validate(s, public); err != nil {
		return "", fmt.Errorf("create sandbox %q: %w", s.Name, err)
	}
	img, err := d.Image(ctx, s.Image)
	if err != nil {
		return "", fmt.Errorf("create sandbox %s: %w", s.Name, err)
	}
	if _, err := d.checkPids(ctx, s.Limits.Pids); err != nil {
		return "", fmt.Errorf("create sandbox %s: %w", s.Name, err)
	}
	if s.Runtime, err = d.runtimeClass(ctx, s.Runtime); err != nil {
		return "", fmt.Errorf("create sandbox %s: %w", s.Name, err)
	}
	var undo []func(context.Context) error
	defer func() {
		if err == nil {
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		for i := len(undo) - 1; i >= 0; i-- {
			if uerr := undo[i](cctx); uerr != nil {
				d.log.Warn("undo a failed create", zap.String("name", s.Name), zap.Error(uerr))
			}
		}
	}()

	spec, _ := json.Marshal(storeSpec(s)) // plain data always marshals
	sec := &corev1.Secret{ObjectMeta: objectMeta(s.Name, s.Labels), Type: recordType, Data: map[string][]byte{}}
	sec.Annotations[annSpec] = string(spec)
	sec.Annotations[annState] = string(sandbox.StateCreated)
	sec.Annotations[annImage] = img.ID
	for _, e := range s.Env {
		k, v, _ := strings.Cut(e, "=")
		if k != "HOME" {
			sec.Data[k] = []byte(v)
		}
	}
	if sec, err = d.cs.CoreV1().Secrets(d.ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		return "", d.fail("create sandbox "+s.Name, err)
	}
	undo = append(undo, func(ctx context.Context) error { return d.deleteRecord(ctx, s.Name) })

	size := s.Limits.WorkspaceBytes
	if size <= 0 {
		size = d.wsSize
	}
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: objectMeta(claimName(s.Name), s.Labels),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: quantity(size)}},
		},
	}
	claim.Labels[labelSandbox] = s.Name
	if d.class != "" {
		claim.Spec.StorageClassName = &d.class
	}
	if d.hostDir != "" {
		pv, err := d.hostVolume(ctx, s.Name, s.Labels, size, s.Limits.WorkspaceBytes > 0)
		undo = append(undo, func(ctx context.Context) error { return d.deleteVolume(ctx, claimName(s.Name)) })
		if err != nil {
			return "", err
		}
		noClass := ""
		claim.Spec.StorageClassName, claim.Spec.VolumeName = &noClass, pv
	}
	if _, err := d.cs.CoreV1().PersistentVolumeClaims(d.ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		return "", d.fail("create the workspace claim of "+s.Name, err)
	}
	if d.hostDir != "" {
		// Bound now, so that the scheduler places the Pod at once at
		// Start instead of retrying it after the bind.
		if err := d.awaitBound(ctx, claim.Name); err != nil {
			return "", err
		}
	} else {
		undo = append(undo, func(ctx context.Context) error { return d.deleteVolume(ctx, claimName(s.Name)) })
		if err := d.ownWorkspace(ctx, sec, storeSpec(s)); err != nil {
			return "", fmt.Errorf("create sandbox %s: %w", s.Name, err)
		}
	}
	d.log.Debug("created", zap.String("name", s.Name), zap.String("image", s.Image))
	return s.Name, nil
}

// pvName is the PersistentVolume of a hostPath workspace claim (volumes
// are cluster-wide: the namespace is in the name).
func (d *Driver) pvName(claim string) string { return "agentd-" + d.ns + "-" + claim }

// hostDirOf is the node directory of a hostPath workspace claim.
func (d *Driver) hostDirOf(claim string) string { return filepath.Join(d.hostDir, d.ns, claim) }

// hostVolume makes the directory of sandbox name's workspace, owned by the
// sandbox user (bounded: an ext4 image of size bytes mounted there), and a
// PersistentVolume of it reserved for its claim; it returns the volume's
// name.
func (d *Driver) hostVolume(ctx context.Context, name string, l map[string]string, size int64, bounded bool) (string, error) {
	claim := claimName(name)
	dir := d.hostDirOf(claim)
	if err := os.MkdirAll(filepath.Dir(dir), 0o711); err != nil {
		return "", fmt.Errorf("workspace of %s: %w", name, err)
	}
	if bounded {
		if err := d.makeBounded(ctx, claim, size); err != nil {
			return "", fmt.Errorf("workspace of %s: %w", name, err)
		}
	} else {
		if err := os.Mkdir(dir, 0o755); err != nil {
			return "", fmt.Errorf("workspace of %s: %w", name, err)
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			return "", fmt.Errorf("workspace of %s: %w", name, err)
		}
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: objectMeta(d.pvName(claim), l),
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: quantity(size)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "",
			ClaimRef:                      &corev1.ObjectReference{Namespace: d.ns, Name: claim},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: ptr(corev1.HostPathDirectory)},
			},
		},
	}
	pv.Labels[labelSandbox] = name
	if _, err := d.cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		return "", d.fail("create the workspace volume of "+name, err)
	}
	return pv.Name, nil
}

// awaitBound waits until a claim is bound to its volume.
func (d *Driver) awaitBound(ctx context.Context, claim string) error {
	for {
		c, err := d.cs.CoreV1().PersistentVolumeClaims(d.ns).Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			return d.fail("read claim "+claim, err)
		}
		if c.Status.Phase == corev1.ClaimBound {
			return nil
		}
		if err := d.sleep(ctx); err != nil {
			return fmt.Errorf("wait for claim %s to bind: %w", claim, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// pod is the sandbox's Pod: the hardening of the Docker driver in
// Kubernetes's terms (doc.go).
func (d *Driver) pod(sec *corev1.Secret, s storedSpec) *corev1.Pod {
	env := []corev1.EnvVar{}
	home := sandbox.HomeDir
	if s.Home != "" {
		home = s.Home
		env = append(env,
			corev1.EnvVar{Name: "XDG_CONFIG_HOME", Value: s.Home + "/.config"},
			corev1.EnvVar{Name: "XDG_CACHE_HOME", Value: s.Home + "/.cache"},
			corev1.EnvVar{Name: "XDG_DATA_HOME", Value: s.Home + "/.local/share"},
			corev1.EnvVar{Name: "XDG_STATE_HOME", Value: s.Home + "/.local/state"})
	}
	env = append(env, corev1.EnvVar{Name: "HOME", Value: home})
	mounts := []corev1.VolumeMount{
		{Name: "workspace", MountPath: sandbox.WorkspaceDir},
		{Name: "tmp", MountPath: "/tmp"},
	}
	vols := []corev1.Volume{
		{Name: "workspace", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName(sec.Name)}}},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: ptr(quantity(s.Limits.TmpBytes))}}},
	}
	if s.Home == "" {
		mounts = append(mounts, corev1.VolumeMount{Name: "home", MountPath: sandbox.HomeDir})
		vols = append(vols, corev1.Volume{Name: "home", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: ptr(quantity(s.Limits.HomeBytes))}}})
	}
	binds := []struct {
		name, host, target string
		rw                 bool
	}{
		{"agentd", s.AgentdHostDir, sandbox.AgentdDir, false},
		{"hub-socket", s.HubSocketHostDir, sandbox.HubSocketDir, false},
		{"key", s.KeyHostDir, sandbox.KeyDir, true}, // agentd removes its key once read
		{"ca", s.CAHostDir, sandbox.CADir, false},
	}
	if d.agentdImage != "" {
		binds = nil // the init container and a Secret instead (tunnel.go)
	}
	for _, b := range binds {
		if b.host == "" {
			continue
		}
		mounts = append(mounts, corev1.VolumeMount{Name: b.name, MountPath: b.target, ReadOnly: !b.rw})
		vols = append(vols, corev1.Volume{Name: b.name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: b.host, Type: ptr(corev1.HostPathDirectory)}}})
	}
	meta := objectMeta(sec.Name, allLabels(sec.ObjectMeta))
	meta.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Secret", Name: sec.Name, UID: sec.UID}}
	p := &corev1.Pod{
		ObjectMeta: meta,
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			ShareProcessNamespace:         ptr(true), // the pause process reaps orphans: Docker's Init
			AutomountServiceAccountToken:  ptr(false),
			EnableServiceLinks:            ptr(false),
			TerminationGracePeriodSeconds: ptr(int64(10)),
			SecurityContext:               d.podSecurity(),
			Containers: []corev1.Container{{
				Name:            container,
				Image:           s.Image,
				ImagePullPolicy: corev1.PullNever,
				Command:         s.Cmd,
				WorkingDir:      sandbox.WorkspaceDir,
				Env:             env,
				EnvFrom:         []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: sec.Name}}}},
				VolumeMounts:    mounts,
				Resources:       resources(s.Limits),
				SecurityContext: containerSecurity(),

				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}},
			Volumes: vols,
		},
	}
	if s.Runtime != "" {
		p.Spec.RuntimeClassName = &s.Runtime
	}
	d.place(&p.Spec)
	return p
}

// deleteRecord deletes sandbox name's Secret; a missing one is not an
// error.
func (d *Driver) deleteRecord(ctx context.Context, name string) error {
	err := d.cs.CoreV1().Secrets(d.ns).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return d.fail("delete sandbox "+name, err)
	}
	return nil
}
