package kube

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/loopfs"
)

// Options configure a Driver.
type Options struct {
	// Kubeconfig is the path of a kubeconfig file. Default (""):
	// $KUBECONFIG, else the in-cluster service account.
	Kubeconfig string
	// Namespace holds every object the driver makes. Default "default".
	Namespace string
	// HostPathDir, when set, is a directory on the node (this host: the
	// hub runs on the cluster's only node) where the driver makes each
	// workspace as a hostPath PersistentVolume bound to its claim, owned
	// by uid 1000; the workspace calls (Export, Import, Copy) then work
	// on that directory. A spec's Limits.WorkspaceBytes makes it the
	// mount point of an ext4 image of that size (bounded.go; root, loop
	// devices and e2fsprogs). Empty: claims of StorageClass, and the
	// workspace calls go through a helper Pod that mounts the claim
	// (helperpod.go).
	HostPathDir string
	// StorageClass is the class of the workspace claims when HostPathDir
	// is empty ("": the cluster's default class).
	StorageClass string
	// AgentdImage, when set, is an image holding the static agentd at
	// /agentd (make k8s-up imports agentd.local/agentd:VERSION): each Pod
	// gets agentd from an init container of it and its key and CA from a
	// Secret, and no hostPath volume but its workspace's (tunnel.go), so
	// it can run on any node. Requires HubAdvertise. Empty: hostPath
	// mounts of the spec's host directories (the hub's node only).
	AgentdImage string
	// HubAdvertise is the host:port of the hub's sandbox listener that the
	// Pods dial (with AgentdImage). The NetworkPolicy
	// agentd-sandbox-tunnel lets them reach its addresses (a name is
	// resolved once, here, and given to the Pods in /etc/hosts) on that
	// port, and nothing else.
	HubAdvertise string
	// WorkspaceSize is the size a claim requests when the spec bounds no
	// workspace. Default 1 GiB. A spec's Limits.WorkspaceBytes is its
	// claim's request: with a StorageClass, the bound is the
	// provisioner's to enforce.
	WorkspaceSize int64
	// Logger receives what the driver does. Default: a no-op logger.
	Logger *zap.Logger
	// StartTimeout bounds Start's wait for the Pod to run (a Pod the
	// scheduler cannot place stays Pending for ever). Default 2 min, 4 min
	// with AgentdImage (the kubelet makes two containers, one after the
	// other).
	StartTimeout time.Duration
	// ProbeImage is the image of ProbePolicy's Pods (it needs bash,
	// timeout and seq). Default: sandbox.BaseImage.
	ProbeImage string
	// PollInterval is how often the driver reads a Pod while it waits for
	// it to start or go. Default 100 ms.
	PollInterval time.Duration
	// NodeSelector are node labels every Pod the driver makes requires
	// (sandboxes', workspace helpers', the policy probe's): a pool of
	// nodes for sandboxes (placement.go). Create checks images and
	// podPidsLimit on the matching nodes only. Default: none.
	NodeSelector map[string]string
	// Tolerations are given to every Pod the driver makes, to let them
	// onto nodes whose taints keep other Pods off (a dedicated pool's).
	// Default: none (nodes with NoSchedule or NoExecute taints are not
	// the sandboxes').
	Tolerations []corev1.Toleration
}

// Driver is a sandbox.Driver on one namespace of a Kubernetes cluster. It
// is safe for concurrent use.
type Driver struct {
	cs           kubernetes.Interface
	httpc        *http.Client
	cfg          *rest.Config // for exec into workspace helper Pods
	ns           string
	host         string // the API server, for messages
	hostDir      string
	class        string
	wsSize       int64
	poll         time.Duration
	log          *zap.Logger
	startTimeout time.Duration
	// loopControl attaches bounded workspaces' images (tests: one that
	// is not).
	loopControl string
	// copies: how copies between claims went (copy.go).
	copies copyStats

	probeImage string
	probeMu    sync.Mutex // one ProbePolicy at a time
	// agentdImage and hub: Options.AgentdImage and HubAdvertise, resolved.
	agentdImage string
	hub         hubAddr

	mu       sync.Mutex
	nodePids map[string]int64 // node → its kubelet's podPidsLimit
	probed   PolicyProbe      // ProbePolicy's last result

	// nodeSelector and tolerations: Options', given to every Pod.
	nodeSelector map[string]string
	tolerations  []corev1.Toleration
}

var _ sandbox.Driver = (*Driver)(nil)

// New returns a Driver for the cluster opts names. It does not contact the
// cluster (Ping does).
func New(opts Options) (*Driver, error) {
	cfg, err := restConfig(opts.Kubeconfig)
	if err != nil {
		return nil, err
	}
	httpc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	cs, err := kubernetes.NewForConfigAndClient(cfg, httpc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	d := &Driver{
		cs: cs, httpc: httpc, cfg: cfg, ns: opts.Namespace, host: cfg.Host, class: opts.StorageClass,
		wsSize: opts.WorkspaceSize, poll: opts.PollInterval, log: opts.Logger, nodePids: map[string]int64{},
		loopControl:  loopfs.LoopControl,
		probeImage:   opts.ProbeImage,
		nodeSelector: maps.Clone(opts.NodeSelector), tolerations: slices.Clone(opts.Tolerations),
	}
	if d.probeImage == "" {
		d.probeImage = sandbox.BaseImage
	}
	if d.ns == "" {
		d.ns = "default"
	}
	if d.wsSize <= 0 {
		d.wsSize = 1 << 30
	}
	if d.poll <= 0 {
		d.poll = 100 * time.Millisecond
	}
	if d.log == nil {
		d.log = zap.NewNop()
	}
	d.log = d.log.Named("kube")
	if opts.AgentdImage != "" {
		if opts.HubAdvertise == "" {
			return nil, errors.New("kubernetes driver: an agentd image needs the hub's advertised sandbox address (HubAdvertise)")
		}
		if d.hub, err = resolveHub(opts.HubAdvertise); err != nil {
			return nil, fmt.Errorf("kubernetes driver: %w", err)
		}
		d.agentdImage = opts.AgentdImage
	}
	if d.startTimeout = opts.StartTimeout; d.startTimeout <= 0 {
		d.startTimeout = startTimeout
		if d.agentdImage != "" {
			d.startTimeout += initTimeout
		}
	}
	if opts.HostPathDir != "" {
		dir, err := filepath.Abs(opts.HostPathDir)
		if err != nil {
			return nil, fmt.Errorf("host path dir: %w", err)
		}
		if err := os.MkdirAll(dir, 0o711); err != nil {
			return nil, fmt.Errorf("host path dir: %w", err)
		}
		d.hostDir = dir
	}
	return d, nil
}

// restConfig loads the client configuration from path, $KUBECONFIG or the
// Pod's service account.
func restConfig(path string) (*rest.Config, error) {
	if path == "" {
		path = os.Getenv("KUBECONFIG")
	}
	if path == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no kubeconfig (--kubeconfig, $KUBECONFIG) and not in a cluster: %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	cfg.QPS, cfg.Burst = 50, 100 // the waits poll; the default 5/10 throttles them
	// The client certificate read now, not reloaded: client-go's reloader
	// is a goroutine nothing stops (a rotated certificate needs a restart).
	if err := rest.LoadTLSFiles(cfg); err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// Namespace is the namespace the driver works in.
func (d *Driver) Namespace() string { return d.ns }

// clusterError is an API failure that errors.Is matches against kind
// (sandbox.ErrUnavailable or sandbox.ErrNotFound) as well as the client's
// own error.
type clusterError struct {
	msg  string
	kind error
	err  error
}

func (e *clusterError) Error() string   { return e.msg + ": " + e.err.Error() }
func (e *clusterError) Unwrap() []error { return []error{e.kind, e.err} }

// fail wraps a client error from op, classifying an unreachable API server
// and missing objects for errors.Is.
func (d *Driver) fail(op string, err error) error {
	var status apierrors.APIStatus
	switch {
	case apierrors.IsNotFound(err):
		return &clusterError{msg: op, kind: sandbox.ErrNotFound, err: err}
	case errors.As(err, &status):
		return fmt.Errorf("%s: %w", op, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w", op, err)
	default: // no answer from the API server
		return &clusterError{msg: "kubernetes API server at " + d.host + " is not reachable (" + op + ")", kind: sandbox.ErrUnavailable, err: err}
	}
}

// notFound is ErrNotFound for a sandbox that is not there.
func notFound(op, id string) error {
	return fmt.Errorf("%s %s: %w", op, id, sandbox.ErrNotFound)
}

// Ping checks that the API server answers and the namespace exists.
func (d *Driver) Ping(ctx context.Context) error {
	if _, err := d.cs.Discovery().ServerVersion(); err != nil {
		return d.fail("ping", err)
	}
	if _, err := d.cs.CoreV1().Namespaces().Get(ctx, d.ns, metav1.GetOptions{}); err != nil {
		return d.fail("namespace "+d.ns, err)
	}
	return nil
}

// quantity is n bytes as a resource quantity.
func quantity(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.BinarySI) }

// podGone waits until the Pod name is gone, and returns the last status it
// read (nil when there was no Pod).
func (d *Driver) podGone(ctx context.Context, name string) (*corev1.Pod, error) {
	var last *corev1.Pod
	for {
		p, err := d.cs.CoreV1().Pods(d.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return last, nil
		}
		if err != nil {
			return last, d.fail("read pod "+name, err)
		}
		last = p
		if err := d.sleep(ctx); err != nil {
			return last, fmt.Errorf("wait for pod %s to go: %w", name, err)
		}
	}
}

// sleep waits one poll interval, or until ctx is done.
func (d *Driver) sleep(ctx context.Context) error {
	select {
	case <-time.After(d.poll):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close releases the driver's idle connections to the API server.
func (d *Driver) Close() error {
	d.httpc.CloseIdleConnections()
	return nil
}
