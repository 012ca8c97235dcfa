package agentd

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"os/user"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/devdepot-ai/agentd/internal/inventory"
	"github.com/devdepot-ai/agentd/runner"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// systemService serves agentdv1.SystemService.
type systemService struct {
	agentdv1.UnimplementedSystemServiceServer
	s *Server

	pyMu      sync.Mutex
	pyTried   time.Time // last attempt to learn the version
	pyVersion string
}

var _ agentdv1.SystemServiceServer = (*systemService)(nil)

// capabilities lists what this daemon implements, for SystemService.Info.
var capabilities = []string{"files", "process", "pty", "python", "snapshot", "system", "inventory", "activity", "ports"}

// Info describes the daemon and the machine it runs on.
func (y *systemService) Info(ctx context.Context, _ *agentdv1.InfoRequest) (*agentdv1.InfoResponse, error) {
	o := y.s.opts
	resp := &agentdv1.InfoResponse{
		Version:      o.Version,
		Mode:         o.Mode,
		Os:           runtime.GOOS,
		Arch:         runtime.GOARCH,
		Uid:          int32(os.Getuid()),
		Workspace:    o.Workspace,
		Shell:        o.Shell,
		Cpus:         int32(runtime.NumCPU()),
		Capabilities: platformCapabilities(capabilities),
		Environment:  o.Environment,
		Image:        o.Image,
		Isolation:    kernelIsolation(),
	}
	if resp.Isolation == "" && o.Mode == "sandbox" {
		resp.Isolation = "runc"
	}
	if resp.Isolation == "gvisor" {
		resp.Platform = o.Platform
	}
	resp.Hostname, _ = os.Hostname()
	if u, err := user.Current(); err == nil {
		resp.User, resp.Home = u.Username, u.HomeDir
	}
	if resp.Home == "" {
		resp.Home, _ = os.UserHomeDir()
	}
	resp.OsVersion = osRelease()
	resp.MemoryBytes, resp.MemoryAvailableBytes = memInfo()
	resp.DiskFreeBytes = diskFree(o.Workspace)
	resp.PythonVersion = y.pythonVersion(ctx)
	resp.Started = timestamppb.New(y.s.started)
	if t := o.Tunnel; t != nil {
		st := t.t.Status()
		ts := &agentdv1.TunnelStatus{Hub: st.Hub, MachineId: st.MachineID, State: string(st.State), Org: t.org,
			Since: timestamppb.New(st.Since)}
		if !st.ConnectedSince.IsZero() {
			ts.ConnectedSince = timestamppb.New(st.ConnectedSince)
		}
		if !st.NextAttempt.IsZero() {
			ts.NextAttempt = timestamppb.New(st.NextAttempt)
		}
		if st.Err != nil {
			ts.LastError = st.Err.Error()
		}
		resp.Tunnel = ts
	}
	return resp, nil
}

// pythonVersion asks python3 once, bounded in time; empty when there is none.
func (y *systemService) pythonVersion(ctx context.Context) string {
	y.pyMu.Lock()
	defer y.pyMu.Unlock()
	if y.pyVersion != "" || time.Since(y.pyTried) < 30*time.Second {
		return y.pyVersion // known, or asked recently: a failure is retried later, not cached
	}
	y.pyTried = time.Now()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	py, err := runner.LookPath(y.s.opts.Python, "/", y.s.opts.Env)
	if err != nil {
		return ""
	}
	cmd := exec.CommandContext(ctx, py, "--version")
	cmd.Env = y.s.opts.Env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return ""
	}
	y.pyVersion = strings.TrimPrefix(strings.TrimSpace(string(out)), "Python ")
	return y.pyVersion
}

// memInfo reads total and available memory from /proc/meminfo (Linux); zero elsewhere.
func memInfo() (total, available int64) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "MemTotal:":
			total = kb * 1024
		case "MemAvailable:":
			available = kb * 1024
		}
	}
	return total, available
}

// Inventory lists the tools on PATH and the Python packages, minus the base.
func (y *systemService) Inventory(ctx context.Context, req *agentdv1.InventoryRequest) (*agentdv1.InventoryResponse, error) {
	inv, err := inventory.Take(ctx, inventory.Options{Env: y.s.opts.Env, Python: y.s.opts.Python, NoVersions: req.GetNoVersions()})
	if err != nil {
		return nil, err
	}
	if b := req.GetBase(); b != nil {
		var base inventory.Inventory
		for _, t := range b.GetTools() {
			base.Tools = append(base.Tools, inventory.Tool{Name: t.GetName(), Version: t.GetVersion()})
		}
		for _, p := range b.GetPythonPackages() {
			base.Packages = append(base.Packages, inventory.Package{Name: p.GetName(), Version: p.GetVersion()})
		}
		inv = inv.Minus(base)
	}
	resp := &agentdv1.InventoryResponse{}
	for _, t := range inv.Tools {
		resp.Tools = append(resp.Tools, &agentdv1.Tool{
			Name: strings.ToValidUTF8(t.Name, "\uFFFD"), Path: strings.ToValidUTF8(t.Path, "\uFFFD"), Version: t.Version,
		})
	}
	for _, p := range inv.Packages {
		resp.PythonPackages = append(resp.PythonPackages, &agentdv1.PythonPackage{Name: p.Name, Version: p.Version})
	}
	return resp, nil
}

// Stats samples the commands this daemon started and its host's load.
func (y *systemService) Stats(context.Context, *agentdv1.StatsRequest) (*agentdv1.StatsResponse, error) {
	resp := &agentdv1.StatsResponse{Cpus: int32(runtime.NumCPU())}
	if p := y.s.procs; p != nil {
		u := p.m.Usage()
		resp.CpuNanos, resp.MemoryBytes, resp.Processes = u.CPUNanos, u.MemoryBytes, u.Processes
		resp.Commands, resp.ProcessStats = int32(u.Commands), u.Counted
	}
	resp.Load1, resp.Load5, resp.Load15 = loadAvg()
	resp.MemoryTotalBytes, resp.MemoryAvailableBytes = memInfo()
	resp.Sampled = timestamppb.New(time.Now())
	return resp, nil
}

// loadAvg reads the load averages from /proc/loadavg (Linux); zero elsewhere.
func loadAvg() (l1, l5, l15 float64) {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, 0, 0
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return 0, 0, 0
	}
	l1, _ = strconv.ParseFloat(f[0], 64)
	l5, _ = strconv.ParseFloat(f[1], 64)
	l15, _ = strconv.ParseFloat(f[2], 64)
	return l1, l5, l15
}
