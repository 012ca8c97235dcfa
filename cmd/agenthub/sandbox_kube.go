package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/sandbox/kube"
)

// The sandbox drivers --sandbox-driver names.
const (
	driverDocker     = "docker"
	driverKubernetes = "kubernetes"
)

func (f *sandboxFlags) registerKube(fs *pflag.FlagSet) {
	fs.StringVar(&f.driver, "sandbox-driver", driverDocker, "where sandboxes run: docker (the Docker engine, --docker-host) or kubernetes (Pods in --namespace of the cluster --kubeconfig names; docs/kubernetes.md)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster for --sandbox-driver kubernetes (default: $KUBECONFIG, else the hub's service account in a Pod)")
	fs.StringVar(&f.namespace, "namespace", "default", "namespace of the sandboxes' Pods, claims and records (--sandbox-driver kubernetes)")
	fs.StringVar(&f.agentdImage, "kube-agentd-image", "", "image holding the static agentd at /agentd (make k8s-up imports agentd.local/agentd:VERSION): each sandbox Pod gets agentd from an init container of it, its key and CA from a Secret, and dials the hub at --sandbox-advertise over the cluster network, so it needs no hostPath but its workspace; needs --sandbox-listen. Empty: hostPath mounts of agentd, the hub's socket, key and CA (the hub's node only)")
	fs.StringArrayVar(&f.nodeSelector, "kube-node-selector", nil, "KEY=VALUE (repeatable): node labels every sandbox Pod (and workspace helper and policy probe Pod) requires, for a pool of nodes of the sandboxes' own (--sandbox-driver kubernetes); images and podPidsLimit are checked on those nodes only")
	fs.StringArrayVar(&f.tolerations, "kube-toleration", nil, "KEY[=VALUE]:EFFECT (repeatable; EFFECT NoSchedule, PreferNoSchedule or NoExecute): a toleration every sandbox Pod (and workspace helper and policy probe Pod) carries, to let them onto nodes tainted to keep other Pods off; without =VALUE any value of KEY (--sandbox-driver kubernetes)")
	fs.StringVar(&f.storageClass, "kube-storage-class", "", "StorageClass of the sandboxes' workspace claims (--sandbox-driver kubernetes); --sandbox-workspace-max is then each claim's request, which the class's provisioner enforces (or not); empty: hostPath volumes in --sandbox-dir, for a single-node cluster whose node is this host, bounded as with docker (ext4 images on loop devices)")
}

// kubePlacement puts --kube-node-selector and --kube-toleration in opts.
func (f *sandboxFlags) kubePlacement(opts *kube.Options) error {
	sel, err := kube.ParseNodeSelector(f.nodeSelector)
	if err != nil {
		return fmt.Errorf("--kube-node-selector: %w", err)
	}
	opts.NodeSelector = sel
	for _, t := range f.tolerations {
		tol, err := kube.ParseToleration(t)
		if err != nil {
			return fmt.Errorf("--kube-toleration: %w", err)
		}
		opts.Tolerations = append(opts.Tolerations, tol)
	}
	return nil
}

// kubeBound is what bounds workspaces on Kubernetes, for env show.
func (f *sandboxFlags) kubeBound() string {
	if f.storageClass != "" {
		return "the claim's request (StorageClass " + f.storageClass + "; its provisioner enforces it)"
	}
	return "ext4 on loop"
}

// kubeDriver returns the Kubernetes driver, and whether it bounds
// workspaces to wsMax; nil (and no error) when sandboxes are auto and the
// cluster does not answer, or hostPath workspaces cannot be bounded here.
// adv is the address sandboxes dial the hub at ("" without
// --sandbox-listen).
func (f *sandboxFlags) kubeDriver(ctx context.Context, dir, adv string, wsMax int64, log *zap.Logger) (sandboxDriver, bool, error) {
	if f.agentdImage != "" && adv == "" {
		return nil, false, usageError{errors.New("--kube-agentd-image: the Pods dial the hub over the network: give --sandbox-listen HOST:PORT (and --sandbox-advertise if they reach it at another address)")}
	}
	opts := kube.Options{Kubeconfig: f.kubeconfig, Namespace: f.namespace, StorageClass: f.storageClass, Logger: log}
	if err := f.kubePlacement(&opts); err != nil {
		return nil, false, usageError{err}
	}
	if f.agentdImage != "" {
		opts.AgentdImage, opts.HubAdvertise = f.agentdImage, adv
	}
	if f.storageClass == "" {
		opts.HostPathDir = filepath.Join(dir, "kube-workspaces")
		if wsMax > 0 {
			// The hub makes the images and mounts them where the kubelet
			// reads the hostPath volumes: this host, as root.
			if err := canBoundWorkspaces("unix://"); err != nil {
				err = fmt.Errorf("--sandbox-workspace-max %s: %w; give --sandbox-workspace-max 0 for unbounded hostPath workspaces, --kube-storage-class, or --sandboxes off", f.wsMax, err)
				if f.mode == "on" {
					return nil, false, err
				}
				log.Warn("no sandboxes (--sandboxes auto): " + err.Error())
				return nil, false, nil
			}
		}
	}
	drv, err := kube.New(opts)
	if err != nil {
		return nil, false, usageError{err}
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = drv.Ping(pctx)
	cancel()
	if err != nil {
		if f.mode == "on" {
			return nil, false, fmt.Errorf("--sandboxes on: %w", err)
		}
		log.Warn("no sandboxes: the Kubernetes API server does not answer (--sandboxes auto)", zap.Error(err))
		return nil, false, nil
	}
	if opts.HostPathDir != "" {
		// Before any sandbox starts: a reboot took the loop devices and
		// mounts of the bounded workspaces.
		if err := drv.RecoverWorkspaces(ctx); err != nil {
			log.Error("recovering the sandboxes' workspaces", zap.Error(err))
		}
	}
	log.Info("sandboxes on Kubernetes are stopped where the policy would pause them (no freezer); a running one is forked with its bounded workspace frozen")
	return drv, wsMax > 0, nil
}

// kubeEgress gives environments of network public the driver's public
// network: a NetworkPolicy that allows egress to public addresses only,
// which holds only where the cluster's CNI enforces policy. The guard
// probes that at once (in the background; public is refused until the
// probe says enforced) and again every 5 minutes; calls to public
// sandboxes are refused while it says not enforced, naming the cause.
func kubeEgress(drv sandboxDriver, o *sandboxes.Options) {
	kd, ok := drv.(*kube.Driver)
	if !ok {
		return
	}
	g := kube.NewPolicyGuard(kd, 0)
	g.Tick(context.Background())
	o.PublicNetwork, o.Egress = kube.NetworkPublic, g
}
