// Package kube is the sandbox.Driver for Kubernetes, on k8s.io/client-go: a
// sandbox is a Pod, its workspace a PersistentVolumeClaim, placement the
// scheduler's. It passes the drivertest suite against a real API server and
// kubelet (make k8s-up), never a fake clientset.
//
// A Pod runs from the moment it exists and cannot be stopped and started
// again, while a sandbox is created, started, stopped and started again
// with its workspace. So a sandbox is three objects named after Spec.Name
// (which is also its id), in one namespace:
//
//   - a Secret of type agentd.devdepot.ai/sandbox, its record: the spec in
//     an annotation, its environment (agentd's credential among it) as the
//     data the Pod takes with envFrom, so no credential is in a Pod spec;
//     and how its last run ended while no Pod runs. Create makes it.
//   - a PersistentVolumeClaim NAME-workspace, mounted at /workspace. The
//     cluster here has no provisioner: given Options.HostPathDir the driver
//     makes each workspace a directory there, owned by uid 1000, and a
//     hostPath PersistentVolume reserved for the claim (the hub runs on the
//     only node); otherwise the claim names Options.StorageClass and Create
//     makes its root the sandbox user's through a helper Pod (no fsGroup:
//     the kubelet would rewrite every file's group and mode at each start).
//     A spec's Limits.WorkspaceBytes is the claim's request; a hostPath
//     workspace is then an ext4 image of that size mounted at its
//     directory (bounded.go, package loopfs, as the Docker driver's).
//   - a Pod NAME, made by Start from the record and deleted by Stop (with
//     the spec's grace period: SIGTERM, SIGKILL after it), which records
//     its exit code first. Remove deletes all three.
//
// The Pod carries the Docker driver's hardening in Kubernetes's terms: uid
// and gid 1000, runAsNonRoot, a read-only root, every capability dropped,
// no privilege escalation, seccomp RuntimeDefault; CPU and memory limits
// from the spec (small requests, so the scheduler packs idle sandboxes as
// one engine does); /tmp and HOME as memory-backed emptyDirs with the
// spec's sizes; a shared process namespace, so that the pause process
// reaps orphans as Docker's init does; imagePullPolicy Never; no service
// account token, no service links; the NetworkPolicy agentd-sandbox-none
// (no traffic in or out) on every sandbox, and for network "public" also
// agentd-sandbox-public: egress to public IPv4 addresses only, as Docker's
// public network (netpol.go). Policies hold only where the cluster's CNI
// enforces them: ProbePolicy tries it (probe.go), and public is refused
// unless it found them enforced.
// By default agentd, the hub's socket, the key and the CA bundle are
// hostPath mounts of the spec's host directories: a single-node
// arrangement. With Options.AgentdImage and HubAdvertise (tunnel.go) the
// Pod has no hostPath volume but its workspace's: agentd comes from an
// init container of that image, the key and CA files from a Secret only
// the init container mounts, and agentd dials the hub's TLS listener over
// the cluster network under the NetworkPolicy agentd-sandbox-tunnel
// (egress to that address and port only). docs/kubernetes.md says what
// more nodes need. An allow list's egress proxy goes the same way (agentd
// sends its CONNECTs over TLS to that listener), so it needs no rule more.
//
// What Kubernetes cannot do, the driver refuses rather than weakens:
//
//   - Pause: no freezer in the API. Where the hub runs on the Pod's node,
//     Pause freezes the Pod's cgroup on this host (pause.go) and Inspect
//     says paused; elsewhere it returns sandbox.ErrNotSupported, saying
//     why, and the hub stops the sandbox instead. To fork a running
//     sandbox it cannot pause it calls CopyRunningWorkspace, which freezes
//     a bounded workspace's file system for the copy and refuses an
//     unbounded one.
//   - A per-Pod pids limit: the kubelet bounds every Pod of a node by its
//     podPidsLimit. Where this host is a node, a lower limit pins the Pod
//     there and Start writes it into the container's pids cgroup;
//     elsewhere Create refuses a spec whose limit is below a node's (or
//     when a node has none). Stats reports the limit that holds.
//   - Pull: only kubelets pull, when a Pod needs an image; sandbox Pods
//     never do. Pull has every ready node's kubelet pull through a pull
//     Pod whose command no image holds (pull.go: the image's code never
//     runs), with the node's registry configuration, not the hub's. Image
//     finds images in the nodes' status, which shows names and sizes but
//     no config (no labels, user, env), and lags a pull by up to 40 s.
//
// Workspace export, import and copy use the snapshot export format
// (internal/sandbox/wstar). On hostPath volumes they read and write the
// directory, opened as an os.Root. On provisioned volumes, which the hub
// cannot read, a helper Pod mounts the claim and the driver streams a tar
// over exec (helperpod.go): the sandbox's image and hardening but root
// with the capabilities that read every file and keep owners and modes
// (it runs only the driver's fixed commands), GNU tar inside, the stream
// checked by wstar before it reaches that tar; a copy between claims one
// Pod can mount is one helper's cp -a within the node (copy.go).
package kube
