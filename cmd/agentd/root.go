package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/agentd"
	"github.com/devdepot-ai/agentd/internal/listen"
	"github.com/devdepot-ai/agentd/internal/logging"
	"github.com/devdepot-ai/agentd/internal/version"
)

// usageError is a mistake in the command line (exit 2).
type usageError struct{ error }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "agentd",
		Short: "The execution environment for AI agents: files, shell, Python, snapshots",
		Long: `agentd gives an AI agent a place where its files live and its commands run.

It serves one gRPC surface (files, processes, system info, …) on a local socket,
on a loopback TCP port, or through a tunnel to a control plane. Commands run as
the user who runs agentd, with that user's permissions.`,
		Example: `  # serve on a unix socket, workspace = current directory
  agentd serve --listen unix://$PWD/agentd.sock --workspace .

  # then, from another terminal
  agentctl --addr unix://$PWD/agentd.sock sh 'echo hello'`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.Version,
	}
	root.SetVersionTemplate(version.String("agentd") + "\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newServeCmd(), newPairCmd(), newRunCmd(), newStatusCmd(), newUnpairCmd(), newLogCmd(), newVersionCmd(),
		newInstallCmd(), newUninstallCmd(), newStartCmd(), newStopCmd(), newRestartCmd(), newSandboxInitCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and build date",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), version.String("agentd"))
		},
	}
}

func newServeCmd() *cobra.Command {
	var (
		addr, workspace, mode, tokenFile, stateDir, logLevel, python string
	)
	cmd := &cobra.Command{
		Use:   "serve --listen ADDR",
		Short: "Serve the agentd API on a local socket or a TCP port",
		Long: `Serve the agentd API on a unix socket (created 0600) or a TCP port.

A TCP address other than loopback requires --token-file: every call must then
present that bearer token. Stop with Ctrl-C or SIGTERM: running commands get
SIGTERM, a grace period, then SIGKILL.`,
		Example: `  agentd serve --listen unix:///tmp/agentd.sock
  agentd serve --listen tcp://127.0.0.1:7777 --workspace ~/src
  agentd serve --listen tcp://0.0.0.0:7777 --token-file ~/.config/agentd/token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := listen.Parse(addr)
			if err != nil {
				return usageError{fmt.Errorf("--listen: %w", err)}
			}
			if err := checkMode(mode); err != nil {
				return err
			}
			var token string
			if tokenFile != "" {
				b, err := os.ReadFile(tokenFile)
				if err != nil {
					return fmt.Errorf("--token-file: %w", err)
				}
				token = strings.TrimSpace(string(b))
				if token == "" {
					return fmt.Errorf("--token-file %s is empty", tokenFile)
				}
			} else if !a.IsLoopback() {
				return usageError{errors.New("--listen on a non-loopback address needs --token-file (anyone who can reach the port could run commands as you)")}
			}
			log, err := logging.New(logLevel)
			if err != nil {
				return usageError{fmt.Errorf("--log-level: %w", err)}
			}
			defer log.Sync() //nolint:errcheck // stderr
			srv, err := agentd.New(cmd.Context(), agentd.Options{
				Workspace:  workspace,
				Mode:       mode,
				StateDir:   stateDir,
				Token:      token,
				Reflection: a.Network == "unix",
				Python:     python,
				Logger:     log.Named("agentd"),
			})
			if err != nil {
				return err
			}
			defer srv.Close() // Serve closes it too; this is for a listen that fails
			lis, err := listen.Listen(a)
			if err != nil {
				return fmt.Errorf("listen: %w", err)
			}
			log.Info("serving", zap.String("addr", a.String()), zap.String("workspace", srv.Options().Workspace),
				zap.String("mode", srv.Options().Mode), zap.String("version", version.Version))
			err = srv.Serve(cmd.Context(), lis)
			if a.Network == "unix" {
				os.Remove(a.Address)
			}
			log.Info("stopped")
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "listen", "", "address to serve on: unix:///path/agentd.sock or tcp://HOST:PORT (required)")
	f.StringVar(&workspace, "workspace", "", "directory relative paths resolve against (default: your home; /workspace in sandbox mode)")
	f.StringVar(&mode, "mode", agentd.ModeMachine, "machine (your own machine) or sandbox (inside a container)")
	f.StringVar(&tokenFile, "token-file", "", "file holding the bearer token callers must present")
	f.StringVar(&stateDir, "state-dir", "", "directory for snapshots and the audit log (default: $AGENTD_STATE_DIR or ~/.local/state/agentd)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&python, "python", "python3", "Python interpreter for PythonService: a path, or a name looked up on the user's PATH")
	return cmd
}

// checkMode refuses an unknown --mode as a command-line mistake (exit 2).
func checkMode(mode string) error {
	if mode != agentd.ModeMachine && mode != agentd.ModeSandbox {
		return usageError{fmt.Errorf("--mode %q: want %s or %s", mode, agentd.ModeMachine, agentd.ModeSandbox)}
	}
	return nil
}
