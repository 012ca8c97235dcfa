package main

import (
	"bufio"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/durable"
	"github.com/devdepot-ai/agentd/internal/egressproxy"
	"github.com/devdepot-ai/agentd/internal/hub"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/imageref"
	"github.com/devdepot-ai/agentd/internal/listen"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/docker"
	"github.com/devdepot-ai/agentd/internal/sandbox/egress"
	"github.com/devdepot-ai/agentd/internal/sandbox/imagecheck"
	"github.com/devdepot-ai/agentd/internal/units"
)

// sandboxFlags are agenthub serve's sandbox settings.
type sandboxFlags struct {
	mode        string // auto, on, off
	dockerHost  string
	agentd      string
	dir         string
	network     string
	subnet      string
	allow       []string
	insecure    []string // --insecure-registry
	registryCA  string   // --registry-ca
	warmBuiltin int
	warmCustom  int
	idleTTL     time.Duration
	pauseAfter  string
	stopAfter   string
	deleteAfter string
	// archiveAfter, archiveURL, archiveShared and orgMaxArchive: the
	// archived state (archive.go).
	archiveAfter  string
	archiveURL    string
	archiveShared bool
	orgMaxArchive string
	fs            *pflag.FlagSet // to tell a flag given from its default
	maxImage      int64
	secretDir     string
	secretCmd     string
	releases      string
	cpus          float64
	orgMax        int
	tokenMax      int
	wsMax         string
	// noNetwork (the demo's hub): every sandbox gets network none, so no
	// egress rules or network are installed on the host.
	noNetwork bool
	// allowPrivate is --egress-allow-private (allowprivate.go).
	allowPrivate []string
	// driver, kubeconfig, namespace and storageClass: the Kubernetes
	// driver (sandbox_kube.go).
	driver, kubeconfig, namespace, storageClass string
	// agentdImage: --kube-agentd-image; tunnelListen, tunnelAdvertise:
	// the sandboxes' TCP listener (sandbox_tunnel.go).
	agentdImage, tunnelListen, tunnelAdvertise string
	// nodeSelector, tolerations: --kube-node-selector, --kube-toleration.
	nodeSelector, tolerations []string
}

func (f *sandboxFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.mode, "sandboxes", "auto", "run container sandboxes: auto (when a Docker engine answers), on (refuse to start without one) or off")
	fs.StringVar(&f.dockerHost, "docker-host", "", "Docker engine for sandboxes (default: $DOCKER_HOST, else the local socket)")
	fs.StringVar(&f.agentd, "agentd", "", "static agentd binary mounted into sandboxes (default: agentd next to agenthub, else on PATH)")
	fs.StringVar(&f.dir, "sandbox-dir", "", "directory for the sandboxes' socket and agentd (default: 'sandboxes' beside --db; with a postgres:// --db, in ~/.local/share/agenthub)")
	fs.StringVar(&f.network, "sandbox-network", egress.DefaultNetworkName, "Docker network of sandboxes with network access (the hub makes it, with a bridge agsb-<hash> named after it, and installs and re-checks its egress rules; two hubs on one engine need two names)")
	fs.StringVar(&f.subnet, "sandbox-subnet", "", "IPv4 subnet of that network (default "+egress.DefaultSubnet+"; change it if it clashes)")
	fs.StringArrayVar(&f.allow, "allow-registry", nil, "also allow custom images from this registry host (repeatable; '*.example.com' for subdomains)")
	fs.StringArrayVar(&f.insecure, "insecure-registry", nil, "speak plain http to this registry host[:port] when https does not answer, as Docker's option (repeatable; 127.0.0.0/8 is insecure without it); also allows it as --allow-registry does")
	fs.StringVar(&f.registryCA, "registry-ca", "", "PEM file of CA certificates trusted for registries' certificates besides the system's (a registry with a private CA)")
	fs.IntVar(&f.warmBuiltin, "warm-builtin", 2, "started-ahead sandboxes per org for the built-in environment")
	fs.IntVar(&f.warmCustom, "warm-custom", 0, "started-ahead sandboxes per org for each custom image")
	fs.StringVar(&f.pauseAfter, "sandbox-pause-after", "5m", "pause a conversation's sandbox (its processes frozen, no CPU) after this long without calls, or never; an environment's own (agentctl env set) goes first")
	fs.StringVar(&f.stopAfter, "sandbox-stop-after", "30m", "stop a conversation's sandbox (container stopped, /workspace kept) after this long without calls, or never")
	fs.StringVar(&f.deleteAfter, "sandbox-delete-after", "never", "remove a conversation's sandbox and its /workspace after this long without calls (like 30d), or never")
	fs.StringVar(&f.archiveAfter, "sandbox-archive-after", "7d", "archive a conversation's sandbox (/workspace packed into the archive store, container and volume removed; a call restores it) after this long without calls, or never")
	fs.StringVar(&f.archiveURL, "archive-url", "", "where archived sandboxes' workspaces go: file:///DIR or s3://BUCKET?region=…&endpoint=… (default with SQLite: file:// 'archive' beside --db; with a postgres:// --db: none, archiving off)")
	fs.BoolVar(&f.archiveShared, "archive-shared", false, "the file:// --archive-url is a directory every replica shares (NFS, …): replicas on Postgres refuse a file:// URL without it")
	fs.StringVar(&f.orgMaxArchive, "org-max-archive", "50GB", "most bytes one org's archives may take in the archive store (like 50GB, 200GiB); 0: no limit")
	fs.DurationVar(&f.idleTTL, "sandbox-idle-ttl", 30*time.Minute, "deprecated: --sandbox-stop-after")
	_ = fs.MarkDeprecated("sandbox-idle-ttl", "use --sandbox-stop-after (an idle sandbox is stopped, its /workspace kept, no longer removed)")
	f.registerAllowPrivate(fs)
	f.registerKube(fs)
	f.registerTunnel(fs)
	f.fs = fs
	fs.Int64Var(&f.maxImage, "max-image-bytes", 0, "largest custom image, compressed (default and most: 5 GB)")
	fs.StringVar(&f.releases, "agent-releases", "https://registry.npmjs.org", "npm registry asked for agents' newest releases (agent run notes a newer one than its image's); off: never ask")
	fs.Float64Var(&f.cpus, "sandbox-cpus", 0, "CPU limit of each sandbox, as docker run --cpus (default 2, but at most the host's CPUs minus one; 0.5 on a 1-CPU host)")
	fs.StringVar(&f.wsMax, "sandbox-workspace-max", "10GiB", "most each sandbox's /workspace holds (like 10GiB, 512MiB, 2G): an ext4 image per workspace on a loop device, in --sandbox-dir; needs root and the engine (or, with --sandbox-driver kubernetes, the node) on this host; with --kube-storage-class: the claim's request; 0: unbounded (the engine's disk)")
	fs.IntVar(&f.orgMax, "org-max-sandboxes", sandboxes.DefaultOrgMaxSandboxes, "most sandboxes one org may have at once, agent runs included, warm ones not (0: no limit)")
	fs.IntVar(&f.tokenMax, "token-max-sandboxes", sandboxes.DefaultTokenMaxSandboxes, "most sandboxes the calls of one API token may have at once (0: no limit)")
	fs.StringVar(&f.secretDir, "secret-dir", "", "resolve agent runs' secret references ref:PATH to the file DIR/PATH")
	fs.StringVar(&f.secretCmd, "secret-command", "", "resolve them by running this command (split at spaces) with PATH as its last argument; its stdout is the value")
}

// policy returns the hub's lifecycle policy (store.Never: a step off).
// --sandbox-idle-ttl is --sandbox-stop-after's old name.
func (f *sandboxFlags) policy() (pause, stop, del time.Duration, err error) {
	stopFlag, stopVal := "--sandbox-stop-after", f.stopAfter
	if f.fs != nil && f.fs.Changed("sandbox-idle-ttl") {
		if f.fs.Changed("sandbox-stop-after") {
			return 0, 0, 0, usageError{errors.New("--sandbox-idle-ttl is the old name of --sandbox-stop-after: give one")}
		}
		stopFlag, stopVal = "--sandbox-idle-ttl", f.idleTTL.String()
	}
	out := make([]time.Duration, 3)
	for i, fl := range []struct{ name, val, def string }{
		{"--sandbox-pause-after", f.pauseAfter, "5m"}, {stopFlag, stopVal, "30m"}, {"--sandbox-delete-after", f.deleteAfter, "never"},
	} {
		if fl.val == "" {
			fl.val = fl.def
		}
		if out[i], err = sandboxes.ParsePolicyDuration(fl.val); err != nil {
			return 0, 0, 0, usageError{fmt.Errorf("%s %s: %w", fl.name, fl.val, err)}
		}
	}
	return out[0], out[1], out[2], nil
}

// releaseResolver returns what answers agent run's newer-release question
// (nil with --agent-releases off).
func (f *sandboxFlags) releaseResolver() (sandboxes.ReleaseResolver, error) {
	if f.releases == "off" {
		return nil, nil
	}
	if u, err := url.Parse(f.releases); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, usageError{fmt.Errorf("--agent-releases %q: want an http(s) URL, or off", f.releases)}
	}
	return &hub.NPMReleases{Registry: f.releases}, nil
}

// secrets returns the secret provider the flags name (nil: none).
func (f *sandboxFlags) secrets() (hub.SecretResolver, error) {
	switch {
	case f.secretDir != "" && f.secretCmd != "":
		return nil, usageError{fmt.Errorf("--secret-dir and --secret-command: give one")}
	case f.secretDir != "":
		fi, err := os.Stat(f.secretDir)
		if err != nil || !fi.IsDir() {
			return nil, usageError{fmt.Errorf("--secret-dir %s: not a directory", f.secretDir)}
		}
		return hub.DirSecrets{Dir: f.secretDir}, nil
	case f.secretCmd != "":
		argv := strings.Fields(f.secretCmd)
		if _, err := exec.LookPath(argv[0]); err != nil {
			return nil, usageError{fmt.Errorf("--secret-command: %w", err)}
		}
		return hub.CommandSecrets{Argv: argv}, nil
	}
	return nil, nil
}

// options checks the engine, the agentd binary and the egress rules and
// returns the hub's sandbox options. Sandboxes off, or auto without an
// engine: a zero SandboxOptions (no driver). The returned close releases
// the driver.
func (f *sandboxFlags) options(ctx context.Context, db string, log *zap.Logger) (sandboxes.Options, func(), error) {
	none := func() {}
	switch f.mode {
	case "off":
		log.Info("sandboxes are off (--sandboxes off)")
		return sandboxes.Options{}, none, nil
	case "auto", "on":
	default:
		return sandboxes.Options{}, none, usageError{fmt.Errorf("--sandboxes %q: want auto, on or off", f.mode)}
	}
	if f.driver == "" {
		f.driver = driverDocker // the flag's default, for options built in code (the demo's)
	}
	if f.driver != driverDocker && f.driver != driverKubernetes {
		return sandboxes.Options{}, none, usageError{fmt.Errorf("--sandbox-driver %q: want docker or kubernetes", f.driver)}
	}
	if f.driver != driverKubernetes && len(f.nodeSelector)+len(f.tolerations) > 0 {
		return sandboxes.Options{}, none, usageError{errors.New("--kube-node-selector and --kube-toleration are for --sandbox-driver kubernetes")}
	}
	if f.warmBuiltin < 0 || f.warmCustom < 0 || f.warmBuiltin > 100 || f.warmCustom > 100 {
		return sandboxes.Options{}, none, usageError{errors.New("--warm-builtin and --warm-custom: want 0 to 100")}
	}
	pause, stop, del, err := f.policy()
	if err != nil {
		return sandboxes.Options{}, none, err
	}
	for _, r := range f.allow {
		if err := imageref.CheckRegistryPattern(r); err != nil {
			return sandboxes.Options{}, none, usageError{fmt.Errorf("--allow-registry: %w", err)}
		}
	}
	regs, err := f.registries()
	if err != nil {
		return sandboxes.Options{}, none, err
	}
	allowPrivate, kernelAllow, err := f.allowPrivateOptions(ctx)
	if err != nil {
		return sandboxes.Options{}, none, err
	}
	if f.orgMax < 0 || f.tokenMax < 0 {
		return sandboxes.Options{}, none, usageError{errors.New("--org-max-sandboxes and --token-max-sandboxes: want 0 (no limit) or more")}
	}
	wsMax, err := parseWorkspaceMax(f.wsMax)
	if err != nil {
		return sandboxes.Options{}, none, usageError{err}
	}
	hostCPUs := runtime.NumCPU()
	if f.cpus != 0 {
		if err := sandboxes.CheckSandboxCPUs(f.cpus, hostCPUs); err != nil {
			return sandboxes.Options{}, none, usageError{fmt.Errorf("--sandbox-cpus %w", err)}
		}
	}
	var subnet netip.Prefix
	if f.subnet != "" {
		p, err := netip.ParsePrefix(f.subnet)
		if err != nil {
			return sandboxes.Options{}, none, usageError{fmt.Errorf("--sandbox-subnet: %w", err)}
		}
		subnet = p
	}
	dir := f.dir
	if dir == "" {
		dir = filepath.Join(dataDir(db), "sandboxes")
	}
	adv, err := f.tunnelAddr()
	if err != nil {
		return sandboxes.Options{}, none, err
	}
	var (
		drv     sandboxDriver
		bounded bool // wsMax bounds the workspaces
	)
	if f.driver == driverKubernetes {
		drv, bounded, err = f.kubeDriver(ctx, dir, adv, wsMax, log)
	} else {
		drv, bounded, err = f.dockerDriver(ctx, dir, wsMax, log)
	}
	if err != nil || drv == nil {
		return sandboxes.Options{}, none, err
	}
	// Before anything is written there: the agentd staged in dir is the
	// one the other hub's sandboxes mount.
	socketDir := filepath.Join(dir, "socket")
	if sock := filepath.Join(socketDir, sandboxes.SandboxSocketName); listen.Serving(sock) {
		drv.Close()
		return sandboxes.Options{}, none, sandboxDirInUse(dir, f.dir == "", fmt.Errorf("sandbox socket %s: another agenthub is %w", sock, listen.ErrInUse))
	}
	agentdDir, err := stageAgentd(f.agentd, filepath.Join(dir, "agentd"))
	if err != nil {
		drv.Close()
		return sandboxes.Options{}, none, err
	}
	arch, closeArch, err := f.archive(ctx, db, log)
	if err != nil {
		drv.Close()
		return sandboxes.Options{}, none, err
	}
	o := sandboxes.Options{
		Driver: drv, AgentdDir: agentdDir, SocketDir: socketDir,
		WarmBuiltin: f.warmBuiltin, WarmCustom: f.warmCustom, PauseAfter: pause, StopAfter: stop, DeleteAfter: del,
		HostCPUs: hostCPUs, OrgMaxSandboxes: f.orgMax, TokenMaxSandboxes: f.tokenMax,
		ArchiveAfter: arch.after, OrgMaxArchive: arch.orgMax, ArchiveHook: crashHook(),
	}
	if arch.store != nil {
		o.Archive = arch.store
	}
	o.Limits.CPUs = f.cpus
	if bounded {
		o.Limits.WorkspaceBytes, o.WorkspaceBound = wsMax, "ext4 on loop"
		if f.driver == driverKubernetes {
			o.WorkspaceBound = f.kubeBound()
		}
	} else {
		log.Warn("sandbox workspaces are unbounded (--sandbox-workspace-max 0): one sandbox can fill the engine's disk")
	}
	if isPostgres(db) {
		// A replica: its own hub ID on its containers and rows, kept
		// beside its socket so that a restart finds its sandboxes again.
		if o.HubID, err = loadHubID(filepath.Join(dir, "hub-id")); err != nil {
			closeArch()
			drv.Close()
			return sandboxes.Options{}, none, err
		}
	}
	o.ImageCheck.AllowRegistries = append(slices.Clone(f.allow), f.insecure...)
	regs.Apply(&o.ImageCheck)
	o.EgressDial = (&egressproxy.PublicDialer{AllowPrivate: allowPrivate}).Dial
	o.ImageCheck.MaxCompressedBytes = f.maxImage
	// Fail closed: without the egress rules no sandbox gets a network;
	// environments that need one are refused, and say why.
	// Each reaper tick re-checks them (the guard), refuses calls to
	// network sandboxes while they are missing, and re-installs them.
	if f.noNetwork {
		o.BuiltinNetwork = "none"
	} else if f.driver == driverKubernetes {
		o.BuiltinNetwork = "none"
		kubeEgress(drv, &o)
	} else if n, err := egress.Ensure(ctx, egress.Options{NetworkName: f.network, Subnet: subnet, DockerHost: f.dockerHost,
		AllowDNS: hostResolvers(), AllowPrivate: kernelAllow, Logger: log}); err != nil {
		log.Error("sandboxes get no network: the egress rules could not be installed; environments with network public are refused", zap.Error(err))
	} else {
		o.PublicNetwork = f.network
		o.Egress = egress.NewGuard(n, log)
		o.EgressPrivate = n
	}
	if _, err := drv.Image(ctx, sandbox.BaseImage); err != nil {
		log.Warn("the built-in sandbox's image is not on the engine: build it with 'make sandbox-base'", zap.String("image", sandbox.BaseImage), zap.Error(err))
	}
	if err := f.listenTunnel(&o, adv, f.agentdImage != ""); err != nil {
		closeArch()
		drv.Close()
		return sandboxes.Options{}, none, err
	}
	log.Info("sandboxes on", zap.String("docker", dockerHostName(f.dockerHost)), zap.String("agentd", filepath.Join(agentdDir, "agentd")),
		zap.String("network", o.PublicNetwork), zap.Int("warm_builtin", o.WarmBuiltin))
	return o, func() { closeArch(); drv.Close() }, nil
}

// parseWorkspaceMax reads --sandbox-workspace-max: 0, or 64 MiB to 1 TiB.
func parseWorkspaceMax(s string) (int64, error) {
	n, err := units.ParseBytes(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("--sandbox-workspace-max: %w", err)
	case n != 0 && (n < 64<<20 || n > 1<<40):
		return 0, fmt.Errorf("--sandbox-workspace-max %s: want 64MiB to 1024GiB, or 0 for unbounded", s)
	}
	return n, nil
}

// canBoundWorkspaces says why this hub cannot make bounded workspaces: it
// attaches loop devices (root) and makes ext4 images (e2fsprogs) that the
// engine mounts, so the engine runs on this host.
func canBoundWorkspaces(dockerHost string) error {
	if !strings.HasPrefix(dockerHost, "unix://") {
		return fmt.Errorf("the Docker engine %s is not on this host (a unix socket)", dockerHost)
	}
	if os.Geteuid() != 0 {
		return errors.New("bounded workspaces need agenthub to run as root (it attaches loop devices)")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return fmt.Errorf("no loop devices on this host: %w", err)
	}
	for _, bin := range []string{"mkfs.ext4", "debugfs"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%s not found: install e2fsprogs", bin)
		}
	}
	return nil
}

// sandboxDirInUse says that another agenthub runs sandboxes from dir
// (err says where), and how to start this one beside it; byDefault: dir
// is the default for --db, not one given.
func sandboxDirInUse(dir string, byDefault bool, err error) error {
	how := ""
	if byDefault {
		how = " (the default for this --db)"
	}
	return fmt.Errorf("%w\n  it runs sandboxes from --sandbox-dir %s%s: give this agenthub its own --sandbox-dir DIR, or start it without sandboxes with --sandboxes off", err, dir, how)
}

// loadHubID returns the sandbox hub ID stored in path, made (random) and
// stored on first use.
func loadHubID(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if err := sandboxes.ValidHubID(id); err != nil {
			return "", fmt.Errorf("%s: %w (delete the file for a new ID; this replica's sandboxes are then another hub's)", path, err)
		}
		return id, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("sandbox hub ID: %w", err)
	}
	id := store.NewID("hub-")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("sandbox hub ID: %w", err)
	}
	err = durable.WriteFile(path, 0o644, func(w io.Writer) error {
		_, err := io.WriteString(w, id+"\n")
		return err
	})
	if err != nil {
		return "", fmt.Errorf("sandbox hub ID: %w", err)
	}
	return id, nil
}

func dockerHostName(h string) string {
	if h != "" {
		return h
	}
	if e := os.Getenv("DOCKER_HOST"); e != "" {
		return e
	}
	return "unix:///var/run/docker.sock"
}

// stageAgentd copies the static agentd into dir (which then holds it
// alone, for a read-only mount) and returns dir.
func stageAgentd(bin, dir string) (string, error) {
	if bin == "" {
		if exe, err := os.Executable(); err == nil {
			if p := filepath.Join(filepath.Dir(exe), "agentd"); fileExists(p) {
				bin = p
			}
		}
	}
	if bin == "" {
		p, err := exec.LookPath("agentd")
		if err != nil {
			return "", errors.New("no agentd binary to put into sandboxes: give --agentd PATH (a static linux/amd64 build: make build)")
		}
		bin = p
	}
	if err := checkStatic(bin); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("sandbox agentd dir: %w", err)
	}
	src, err := os.Open(bin)
	if err != nil {
		return "", fmt.Errorf("--agentd: %w", err)
	}
	defer src.Close()
	err = durable.WriteFile(filepath.Join(dir, "agentd"), 0o755, func(w io.Writer) error {
		_, err := io.Copy(w, src)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("stage agentd in %s: %w", dir, err)
	}
	return dir, nil
}

// checkStatic refuses an agentd that cannot run in every image: not a
// linux/amd64 ELF, or linked dynamically (Alpine has no glibc).
func checkStatic(bin string) error {
	f, err := elf.Open(bin)
	if err != nil {
		return fmt.Errorf("--agentd %s: not a Linux executable: %w", bin, err)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 {
		return fmt.Errorf("--agentd %s: built for %s; sandboxes are linux/amd64 (GOARCH=amd64 make build)", bin, f.Machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("--agentd %s is linked dynamically and would not run in images without its libc: build it with CGO_ENABLED=0 (make build), or start the hub without sandboxes with --sandboxes off", bin)
		}
	}
	return nil
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// hostResolvers are the IPv4 nameservers of /etc/resolv.conf outside
// loopback: Docker's embedded DNS forwards sandboxes' queries to them from
// the sandbox's namespace, so the egress rules let port 53 through to them.
func hostResolvers() []netip.Addr {
	f, err := os.Open("/etc/resolv.conf")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []netip.Addr
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "nameserver" {
			if a, err := netip.ParseAddr(fields[1]); err == nil && a.Is4() && !a.IsLoopback() {
				out = append(out, a)
			}
		}
	}
	return out
}

// registries reads --insecure-registry and --registry-ca.
func (f *sandboxFlags) registries() (imagecheck.Registries, error) {
	r := imagecheck.Registries{Insecure: f.insecure, CAFile: f.registryCA}
	for _, h := range f.insecure {
		if err := imagecheck.CheckInsecureRegistry(h); err != nil {
			return r, usageError{fmt.Errorf("--insecure-registry: %w", err)}
		}
	}
	if f.registryCA != "" {
		cas, err := imagecheck.LoadCAs(f.registryCA)
		if err != nil {
			return r, usageError{err}
		}
		r.CAs = cas
	}
	return r, nil
}

// sandboxDriver is a sandbox driver the hub closes when it stops.
type sandboxDriver interface {
	sandbox.Driver
	Close() error
}

// dockerDriver returns the Docker engine's driver, and whether it bounds
// workspaces to wsMax; nil (and no error) when sandboxes are auto and
// the engine does not answer, or workspaces cannot be bounded here.
func (f *sandboxFlags) dockerDriver(ctx context.Context, dir string, wsMax int64, log *zap.Logger) (sandboxDriver, bool, error) {
	regs, err := f.registries()
	if err != nil {
		return nil, false, err
	}
	dopts := docker.Options{Host: f.dockerHost, Logger: log} // the driver names itself "docker"
	if len(regs.Insecure) > 0 || regs.CAs != nil {
		dopts.Fetch = regs.Fetch // only then: it costs an image lookup per create
	}
	var unbounded error // why workspaces cannot be bounded here
	if wsMax > 0 {
		if err := canBoundWorkspaces(dockerHostName(f.dockerHost)); err != nil {
			unbounded = fmt.Errorf("--sandbox-workspace-max %s: %w; give --sandbox-workspace-max 0 for workspaces on the engine's disk, unbounded, or --sandboxes off", f.wsMax, err)
			if f.mode == "on" {
				return nil, false, unbounded
			}
		} else {
			dopts.WorkspaceDir = filepath.Join(dir, "workspaces")
		}
	}
	drv, err := docker.New(dopts)
	if err != nil {
		return nil, false, err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = drv.Ping(pctx)
	cancel()
	if err != nil {
		drv.Close()
		if f.mode == "on" {
			return nil, false, fmt.Errorf("--sandboxes on: %w", err)
		}
		log.Warn("no sandboxes: the Docker engine does not answer (--sandboxes auto)", zap.Error(err))
		return nil, false, nil
	}
	if unbounded != nil {
		// An engine answers, but this hub cannot bound what sandboxes
		// write (not root, no e2fsprogs, a remote engine): auto starts the
		// hub without them rather than with unbounded workspaces.
		drv.Close()
		log.Warn("no sandboxes (--sandboxes auto): " + unbounded.Error())
		return nil, false, nil
	}
	if wsMax > 0 {
		// Before any sandbox starts: workspaces whose volume went are
		// released, those whose loop device went (a reboot) get one.
		if err := drv.RecoverWorkspaces(ctx); err != nil {
			log.Error("recovering the sandboxes' workspaces", zap.Error(err))
		}
	}
	return drv, wsMax > 0, nil
}
