package kube

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// The hardening of a sandbox's Pod (doc.go); the workspace helpers keep
// all of it but the user and capabilities (helperSecurity).

// podSecurity is the Pod's security context: uid and gid 1000, not root,
// seccomp RuntimeDefault. No fsGroup: on most volume types the kubelet
// would then walk the whole workspace at every start, giving every file
// the group and g+rw and every directory the setgid bit, which changes
// the agent's files (a 0700 directory came back 02775); a provisioned
// volume's root is made the sandbox user's once, at Create, instead
// (ownWorkspace).
func (d *Driver) podSecurity() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsUser: ptr(int64(uid)), RunAsGroup: ptr(int64(gid)), RunAsNonRoot: ptr(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// containerSecurity is a container's security context: uid and gid 1000,
// not privileged, no privilege escalation, a read-only root, every
// capability dropped, seccomp RuntimeDefault.
func containerSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsUser: ptr(int64(uid)), RunAsGroup: ptr(int64(gid)), RunAsNonRoot: ptr(true),
		Privileged: ptr(false), AllowPrivilegeEscalation: ptr(false), ReadOnlyRootFilesystem: ptr(true),
		Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// resources are a container's CPU and memory limits from l, with small
// requests: the scheduler packs idle sandboxes as the Docker engine does;
// the limits bound them.
func resources(l sandbox.Limits) corev1.ResourceRequirements {
	cpu := *resource.NewMilliQuantity(int64(math.Round(l.CPUs*1000)), resource.DecimalSI)
	return corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: quantity(l.MemoryBytes)},
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(min(10, cpu.MilliValue()), resource.DecimalSI),
			corev1.ResourceMemory: quantity(min(32<<20, l.MemoryBytes)),
		},
	}
}
