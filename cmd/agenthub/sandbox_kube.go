package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

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
	fs.StringVar(&f.storageClass, "kube-storage-class", "", "StorageClass of the sandboxes' workspace claims (--sandbox-driver kubernetes); empty: hostPath volumes in --sandbox-dir, for a single-node cluster whose node is this host")
}

// kubeDriver returns the Kubernetes driver; nil (and no error) when
// sandboxes are auto and the cluster does not answer.
// adv is the address sandboxes dial the hub at ("" without
// --sandbox-listen).
func (f *sandboxFlags) kubeDriver(ctx context.Context, dir, adv string, log *zap.Logger) (sandboxDriver, error) {
	if f.fs != nil && f.fs.Changed("sandbox-workspace-max") && f.wsMax != "0" {
		return nil, usageError{fmt.Errorf("--sandbox-workspace-max %s: the kubernetes driver does not bound workspaces yet (a claim's size is a request, and hostPath volumes have none); give 0", f.wsMax)}
	}
	if f.agentdImage != "" && adv == "" {
		return nil, usageError{errors.New("--kube-agentd-image: the Pods dial the hub over the network: give --sandbox-listen HOST:PORT (and --sandbox-advertise if they reach it at another address)")}
	}
	opts := kube.Options{Kubeconfig: f.kubeconfig, Namespace: f.namespace, StorageClass: f.storageClass, Logger: log}
	if f.agentdImage != "" {
		opts.AgentdImage, opts.HubAdvertise = f.agentdImage, adv
	}
	if f.storageClass == "" {
		opts.HostPathDir = filepath.Join(dir, "kube-workspaces")
	}
	drv, err := kube.New(opts)
	if err != nil {
		return nil, usageError{err}
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = drv.Ping(pctx)
	cancel()
	if err != nil {
		if f.mode == "on" {
			return nil, fmt.Errorf("--sandboxes on: %w", err)
		}
		log.Warn("no sandboxes: the Kubernetes API server does not answer (--sandboxes auto)", zap.Error(err))
		return nil, nil
	}
	log.Warn("sandbox workspaces are unbounded on Kubernetes, and sandboxes are stopped where the policy would pause them (no freezer)")
	return drv, nil
}
