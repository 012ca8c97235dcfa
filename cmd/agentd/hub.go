package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/devdepot-ai/agentd/agentd"
	"github.com/devdepot-ai/agentd/install"
	"github.com/devdepot-ai/agentd/internal/config"
	"github.com/devdepot-ai/agentd/internal/logging"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

func configDir(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	return config.ConfigDir()
}

func newPairCmd() *cobra.Command {
	var hub, code, name, caFile, cfgDir string
	cmd := &cobra.Command{
		Use:   "pair --hub URL --code XXXX-XXXX [--name NAME]",
		Short: "Pair this machine with a hub, using a code from an admin",
		Long: `Pair this machine with an agenthub. An admin of the org creates a pairing code
(agentctl admin pair-code create); agentd makes a key pair here, sends only the
public key with the code, and stores the machine id and the private key in the
config dir (0600 files in a 0700 dir). Prints the machine id alone on stdout.

Then run 'agentd run' (or 'agentd install' to run it as a service).`,
		Example: `  agentd pair --hub https://hub.example.com --code ABCD-EFGH
  agentd pair --hub https://hub.example.com --code ABCD-EFGH --name build-box-3`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if hub == "" || code == "" {
				return usageError{errors.New("pair needs --hub URL and --code XXXX-XXXX")}
			}
			dir, err := configDir(cfgDir)
			if err != nil {
				return err
			}
			m, err := agentd.Pair(cmd.Context(), agentd.PairOptions{Hub: hub, Code: code, Name: name, ConfigDir: dir, CAFile: caFile})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "Paired with %s as %s (%q) in org %s.\nNext: agentd run   (or agentd install, to run it as a service)\n", m.Hub, m.MachineID, m.Name, m.Org)
			fmt.Fprintln(cmd.OutOrStdout(), m.MachineID)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&hub, "hub", os.Getenv("AGENTD_HUB"), "hub URL, https://… (http:// only to a hub on this machine)")
	f.StringVar(&code, "code", "", "pairing code from the admin, XXXX-XXXX")
	f.StringVar(&name, "name", "", "name shown in 'agentctl machines' (default: the hostname)")
	f.StringVar(&caFile, "ca-file", "", "PEM file of the CA that signed the hub's certificate (default: system roots)")
	f.StringVar(&cfgDir, "config-dir", "", "config directory (default: $AGENTD_CONFIG_DIR or ~/.config/agentd)")
	return cmd
}

func newRunCmd() *cobra.Command {
	var workspace, mode, stateDir, cfgDir, socket, logLevel, python string
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the daemon in the foreground: tunnel to the paired hub, plus the local socket",
		Long: `Run the daemon in the foreground. It dials out to the hub it was paired with
(no inbound port is opened), proves who it is with its key, and serves the
agent's calls through that tunnel, reconnecting with backoff when it drops.
It also serves the local socket that 'agentd status' and agentctl use.
Stop with Ctrl-C or SIGTERM: running commands get SIGTERM, a grace period,
then SIGKILL, and the hub is told at once that the machine went offline.`,
		Example: `  agentd run
  agentd run --workspace ~/src`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkMode(mode); err != nil {
				return err
			}
			dir, err := configDir(cfgDir)
			if err != nil {
				return err
			}
			log, err := logging.New(logLevel)
			if err != nil {
				return usageError{fmt.Errorf("--log-level: %w", err)}
			}
			defer log.Sync() //nolint:errcheck // stderr
			opts := agentd.RunOptions{
				Server:    agentd.Options{Workspace: workspace, Mode: mode, StateDir: stateDir, Python: python, Reflection: true, Logger: log.Named("agentd")},
				ConfigDir: dir,
				Socket:    socket,
			}
			if mode == agentd.ModeSandbox {
				// A sandbox the hub started: its credential comes from the
				// hub, in the environment, instead of a pairing. The
				// workload runs as the same uid: it must not read the key
				// from this process (ptrace, /proc/PID/environ or mem).
				if err := agentd.ProtectFromWorkload(); err != nil {
					return err
				}
				c, ok, err := agentd.SandboxFromEnv(os.Getenv)
				_ = os.Unsetenv(agentd.EnvSandboxKey) // no copy in the Go environment either
				_ = os.Unsetenv(agentd.EnvSandboxKeyFile)
				if err != nil {
					return usageError{err}
				}
				if ok {
					opts.Sandbox = c
					opts.Server.Environment, opts.Server.Image, opts.Server.Platform = c.Environment, c.Image, c.Platform
				}
			}
			return install.RunService(cmd.Context(), func(ctx context.Context) error {
				return agentd.Run(ctx, opts)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&workspace, "workspace", "", "directory relative paths resolve against (default: your home; /workspace in sandbox mode)")
	f.StringVar(&mode, "mode", agentd.ModeMachine, "machine (your own machine) or sandbox (inside a container)")
	f.StringVar(&stateDir, "state-dir", "", "directory for snapshots, the audit log and the socket (default: $AGENTD_STATE_DIR or ~/.local/state/agentd)")
	f.StringVar(&cfgDir, "config-dir", "", "config directory (default: $AGENTD_CONFIG_DIR or ~/.config/agentd)")
	f.StringVar(&socket, "socket", "", `local socket (default: agentd.sock in the state dir; "-" for none)`)
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&python, "python", "python3", "Python interpreter for PythonService: a path, or a name looked up on the user's PATH")
	return cmd
}

func newUnpairCmd() *cobra.Command {
	var cfgDir string
	cmd := &cobra.Command{
		Use:   "unpair",
		Short: "Forget the hub this machine is paired with (deletes the key)",
		Long: `Delete the pairing and the machine's private key from the config dir. A running
'agentd run' notices within seconds: it stops the commands the hub started
(TERM, their grace, KILL; recorded in the audit log) and ends. The hub keeps
the machine listed until an admin revokes it (agentctl admin revoke ID);
without the key, nobody can connect as this machine again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := configDir(cfgDir)
			if err != nil {
				return err
			}
			m, _, err := config.LoadMachine(dir)
			if errors.Is(err, config.ErrNotPaired) {
				fmt.Fprintln(cmd.ErrOrStderr(), "This machine is not paired; nothing to do.")
				return nil
			}
			if err := config.RemoveMachine(dir); err != nil {
				return err
			}
			if m.MachineID != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "Unpaired %s from %s. Ask an admin to revoke it there: agentctl admin revoke %s\n", m.MachineID, m.Hub, m.MachineID)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgDir, "config-dir", "", "config directory (default: $AGENTD_CONFIG_DIR or ~/.config/agentd)")
	return cmd
}

// statusError exits with a code and an already-printed explanation.
type statusError struct{ code int }

func (e statusError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func newStatusCmd() *cobra.Command {
	var cfgDir, stateDir string
	cmd := &cobra.Command{
		Use:     "status",
		Short:   "Tell whether the daemon runs and its tunnel is up; exit 0 only then",
		Example: `  agentd status && echo "reachable from the chat"`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			dir, err := configDir(cfgDir)
			if err != nil {
				return err
			}
			m, _, perr := config.LoadMachine(dir)
			switch {
			case errors.Is(perr, config.ErrNotPaired):
				fmt.Fprintln(out, "paired:   no (run: agentd pair --hub URL --code XXXX-XXXX)")
			case perr != nil:
				fmt.Fprintf(out, "paired:   unreadable config: %v\n", perr)
			default:
				fmt.Fprintf(out, "paired:   %s in org %s at %s\n", m.MachineID, m.Org, m.Hub)
			}
			if st, err := install.Status(cmd.Context()); err != nil {
				fmt.Fprintf(out, "service:  %v\n", err)
			} else {
				fmt.Fprintf(out, "service:  %s\n", st)
			}
			if stateDir == "" {
				if stateDir, err = config.StateDir(); err != nil {
					return err
				}
			}
			sock := filepath.Join(stateDir, "agentd.sock")
			info, err := queryDaemon(cmd.Context(), sock)
			if err != nil {
				fmt.Fprintf(out, "daemon:   not running (no answer on %s)\n", sock)
				return statusError{3}
			}
			up := time.Since(info.GetStarted().AsTime()).Round(time.Second)
			fmt.Fprintf(out, "daemon:   running, agentd %s, up %s, workspace %s\n", info.GetVersion(), up, info.GetWorkspace())
			t := info.GetTunnel()
			if t == nil {
				fmt.Fprintln(out, "tunnel:   none (serving only locally: agentd serve)")
				return statusError{1}
			}
			line := fmt.Sprintf("tunnel:   %s to %s as %s", t.GetState(), t.GetHub(), t.GetMachineId())
			if t.GetState() == "connected" {
				line += fmt.Sprintf(" (up %s)", time.Since(t.GetConnectedSince().AsTime()).Round(time.Second))
			} else if t.GetLastError() != "" {
				line += ": " + t.GetLastError()
			}
			fmt.Fprintln(out, line)
			if t.GetState() != "connected" {
				return statusError{1}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgDir, "config-dir", "", "config directory (default: $AGENTD_CONFIG_DIR or ~/.config/agentd)")
	cmd.Flags().StringVar(&stateDir, "state-dir", "", "state directory holding the socket (default: $AGENTD_STATE_DIR or ~/.local/state/agentd)")
	return cmd
}

func queryDaemon(ctx context.Context, sock string) (*agentdv1.InfoResponse, error) {
	if _, err := os.Stat(sock); err != nil {
		return nil, err
	}
	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return agentdv1.NewSystemServiceClient(cc).Info(ctx, &agentdv1.InfoRequest{})
}
