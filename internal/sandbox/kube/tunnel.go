package kube

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// Pods that need nothing from the hub's host (Options.AgentdImage): agentd
// comes from an init container of a small image holding the static
// binary, which copies it into an emptyDir the sandbox container mounts
// read-only at sandbox.AgentdDir; the sandbox's key and CA files come from
// a Secret NAME-agentd that only the init container mounts, and which it
// copies into memory-backed emptyDirs at sandbox.KeyDir (writable: agentd
// removes its key once read, as on a hostPath mount, which it could not
// do on a read-only Secret volume) and sandbox.CADir (read-only). agentd
// dials the hub's sandbox listener over the cluster network
// (Options.HubAdvertise); the NetworkPolicy agentd-sandbox-tunnel lets
// these Pods reach that address and port, and nothing else.

const (
	// filesType is the type of a sandbox's NAME-agentd Secret.
	filesType corev1.SecretType = "agentd.devdepot.ai/sandbox-files"
	// filesSuffix names it.
	filesSuffix = "-agentd"
	// labelTunnel marks the Pods that dial the hub over the network.
	labelTunnel = annPrefix + "tunnel"
	// tunnelPolicyName is the NetworkPolicy of those Pods.
	tunnelPolicyName = "agentd-sandbox-tunnel"
	// initContainer is the init container's name.
	initContainer = "agentd"
	// secretDir is where the init container mounts NAME-agentd.
	secretDir = "/run/agentd-secret"
	// maxHostFile bounds a file of the spec's key and CA host directories.
	maxHostFile = 256 << 10
)

// hubAddr is where Pods dial the hub: the advertised host, its addresses
// (resolved once, in New) and port.
type hubAddr struct {
	host  string
	ips   []netip.Addr
	port  int32
	named bool // host is a name: the Pods get it in /etc/hosts
}

// resolveHub parses and resolves Options.HubAdvertise.
func resolveHub(advertise string) (hubAddr, error) {
	host, port, err := net.SplitHostPort(advertise)
	if err != nil {
		return hubAddr{}, fmt.Errorf("hub advertise address %q: want host:port: %w", advertise, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return hubAddr{}, fmt.Errorf("hub advertise address %q: bad port", advertise)
	}
	h := hubAddr{host: host, port: int32(p)}
	if a, err := netip.ParseAddr(host); err == nil {
		h.ips = []netip.Addr{a.Unmap()}
		return h, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return hubAddr{}, fmt.Errorf("hub advertise address %q: resolve %s: %w", advertise, host, err)
	}
	for _, a := range ips {
		h.ips = append(h.ips, a.Unmap())
	}
	h.named = true
	return h, nil
}

// hostFiles reads the regular files directly in dir (none when dir is
// empty), as Secret data named prefix+"."+file.
func hostFiles(dir, prefix string, into map[string][]byte) error {
	if dir == "" {
		return nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("sandbox files: %w", err)
	}
	for _, e := range ents {
		name := prefix + "." + e.Name()
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") || len(validation.IsConfigMapKey(name)) > 0 {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return fmt.Errorf("sandbox files: %w", err)
		}
		b, err := io.ReadAll(io.LimitReader(f, maxHostFile+1))
		f.Close()
		if err != nil {
			return fmt.Errorf("sandbox files: %w", err)
		}
		if len(b) > maxHostFile {
			return fmt.Errorf("sandbox files: %s is larger than %d bytes", filepath.Join(dir, e.Name()), maxHostFile)
		}
		into[name] = b
	}
	return nil
}

// putFiles makes (or replaces) sandbox sec's NAME-agentd Secret from the
// spec's key and CA host directories, as they are now (the hub puts the
// key there before each start).
func (d *Driver) putFiles(ctx context.Context, sec *corev1.Secret, s storedSpec) (*corev1.Secret, error) {
	data := map[string][]byte{}
	if err := hostFiles(s.KeyHostDir, "key", data); err != nil {
		return nil, err
	}
	if err := hostFiles(s.CAHostDir, "ca", data); err != nil {
		return nil, err
	}
	f := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: sec.Name + filesSuffix, Labels: map[string]string{labelSandbox: sec.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Secret", Name: sec.Name, UID: sec.UID}},
		},
		Type: filesType, Data: data,
	}
	api := d.cs.CoreV1().Secrets(d.ns)
	out, err := api.Create(ctx, f, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		old, gerr := api.Get(ctx, f.Name, metav1.GetOptions{})
		if gerr != nil {
			return nil, d.fail("read "+f.Name, gerr)
		}
		if old.Type != filesType || old.Labels[labelSandbox] != sec.Name {
			return nil, fmt.Errorf("start sandbox %s: secret %s is not its files", sec.Name, f.Name)
		}
		old.Data = data
		out, err = api.Update(ctx, old, metav1.UpdateOptions{})
	}
	if err != nil {
		return nil, d.fail("write "+f.Name, err)
	}
	return out, nil
}

// deleteFiles deletes sandbox name's NAME-agentd Secret, if any.
func (d *Driver) deleteFiles(ctx context.Context, name string) error {
	api := d.cs.CoreV1().Secrets(d.ns)
	f, err := api.Get(ctx, name+filesSuffix, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return d.fail("read "+name+filesSuffix, err)
	case f.Type != filesType || f.Labels[labelSandbox] != name:
		return nil // not ours
	}
	err = api.Delete(ctx, f.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return d.fail("delete "+f.Name, err)
	}
	return nil
}

// withInit gives Pod p (built without host mounts) agentd from the init
// container and the key and CA files from Secret files.
func (d *Driver) withInit(p *corev1.Pod, files *corev1.Secret) {
	var keyItems, caItems []corev1.KeyToPath
	for k := range files.Data {
		if f, ok := strings.CutPrefix(k, "key."); ok {
			keyItems = append(keyItems, corev1.KeyToPath{Key: k, Path: "key/" + f})
		} else if f, ok := strings.CutPrefix(k, "ca."); ok {
			caItems = append(caItems, corev1.KeyToPath{Key: k, Path: "ca/" + f})
		}
	}
	mem := func(n int64) corev1.VolumeSource {
		return corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: ptr(quantity(n))}}
	}
	p.Spec.Volumes = append(p.Spec.Volumes,
		// On disk: the binary in memory would count against the
		// sandbox's memory limit.
		corev1.Volume{Name: "agentd", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr(quantity(256 << 20))}}},
		corev1.Volume{Name: "agentd-key", VolumeSource: mem(1 << 20)},
		corev1.Volume{Name: "agentd-ca", VolumeSource: mem(1 << 20)},
		corev1.Volume{Name: "agentd-files", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: files.Name, Items: append(keyItems, caItems...),
			// Readable by uid 1000; only the init container mounts it.
			DefaultMode: ptr(int32(0o444)),
		}}})
	main := &p.Spec.Containers[0]
	main.VolumeMounts = append(main.VolumeMounts,
		corev1.VolumeMount{Name: "agentd", MountPath: sandbox.AgentdDir, ReadOnly: true},
		corev1.VolumeMount{Name: "agentd-key", MountPath: sandbox.KeyDir},
		corev1.VolumeMount{Name: "agentd-ca", MountPath: sandbox.CADir, ReadOnly: true})
	cmd := []string{"/agentd", "sandbox-init", sandbox.AgentdDir + "/agentd"}
	if len(keyItems) > 0 {
		cmd = append(cmd, secretDir+"/key="+sandbox.KeyDir)
	}
	if len(caItems) > 0 {
		cmd = append(cmd, secretDir+"/ca="+sandbox.CADir)
	}
	p.Spec.InitContainers = []corev1.Container{{
		Name:            initContainer,
		Image:           d.agentdImage,
		ImagePullPolicy: corev1.PullNever,
		Command:         cmd,
		VolumeMounts: []corev1.VolumeMount{
			{Name: "agentd", MountPath: sandbox.AgentdDir},
			{Name: "agentd-key", MountPath: sandbox.KeyDir},
			{Name: "agentd-ca", MountPath: sandbox.CADir},
			{Name: "agentd-files", MountPath: secretDir, ReadOnly: true},
		},
		Resources:                main.Resources,
		SecurityContext:          main.SecurityContext,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}}
	p.Labels[labelTunnel] = "1"
	if d.hub.named {
		ips := make([]string, 0, len(d.hub.ips))
		for _, a := range d.hub.ips {
			ips = append(ips, a.String())
		}
		// Pods here have no DNS: the advertised name, as the hub resolved it.
		p.Spec.HostAliases = []corev1.HostAlias{{IP: ips[0], Hostnames: []string{d.hub.host}}}
	}
}

// ensureTunnelPolicy makes (or corrects) the NetworkPolicy of the Pods
// that dial the hub: no ingress; egress to the hub's addresses and port
// only.
func (d *Driver) ensureTunnelPolicy(ctx context.Context) error {
	var peers []networkingv1.NetworkPolicyPeer
	for _, a := range d.hub.ips {
		peers = append(peers, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: netip.PrefixFrom(a, a.BitLen()).String()}})
	}
	tcp := corev1.ProtocolTCP
	spec := networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{labelTunnel: "1"}},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		Egress: []networkingv1.NetworkPolicyEgressRule{{
			To:    peers,
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr(intstr.FromInt32(d.hub.port))}},
		}},
	}
	api := d.cs.NetworkingV1().NetworkPolicies(d.ns)
	_, err := api.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: tunnelPolicyName}, Spec: spec}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		old, gerr := api.Get(ctx, tunnelPolicyName, metav1.GetOptions{})
		if gerr != nil {
			return d.fail("read network policy "+tunnelPolicyName, gerr)
		}
		if samePolicy(old.Spec, spec) {
			return nil
		}
		old.Spec = spec // the hub moved (another address or port)
		_, err = api.Update(ctx, old, metav1.UpdateOptions{})
	}
	if err != nil {
		return d.fail("write network policy "+tunnelPolicyName, err)
	}
	return nil
}

// samePolicy compares the parts of two policy specs ensureTunnelPolicy
// sets.
func samePolicy(a, b networkingv1.NetworkPolicySpec) bool {
	if len(a.Egress) != 1 || len(a.Egress[0].To) != len(b.Egress[0].To) || len(a.Egress[0].Ports) != 1 ||
		a.Egress[0].Ports[0].Port == nil || *a.Egress[0].Ports[0].Port != *b.Egress[0].Ports[0].Port || len(a.PolicyTypes) != 2 {
		return false
	}
	for i, p := range a.Egress[0].To {
		if p.IPBlock == nil || p.IPBlock.CIDR != b.Egress[0].To[i].IPBlock.CIDR {
			return false
		}
	}
	return true
}
