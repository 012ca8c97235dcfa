package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/devdepot-ai/agentd/install"
)

// serviceFlags are the flags that say which service a command is about.
type serviceFlags struct {
	system             bool
	user               string
	cfgDir, stateDir   string
	detectSystemTarget bool // without --system, fall back to an installed system service
}

func (f *serviceFlags) manager() (*install.Manager, error) {
	newM := install.New
	cfg, state := f.cfgDir, f.stateDir
	if cfg == "" {
		cfg = os.Getenv(install.EnvConfigDir)
	}
	if state == "" {
		state = os.Getenv(install.EnvStateDir)
	}
	m, err := newM(install.Options{System: f.system, User: f.user, ConfigDir: cfg, StateDir: state})
	if err != nil || f.system || !f.detectSystemTarget || m.Installed() {
		return m, err
	}
	if sys, err := newM(install.Options{System: true}); err == nil && sys.Installed() {
		return sys, nil
	}
	return m, nil
}

func newInstallCmd() *cobra.Command {
	var (
		sf                 serviceFlags
		printOnly, noStart bool
	)
	cmd := &cobra.Command{
		Use:   "install [--system --user NAME] [--print]",
		Short: "Install agentd as a service that runs 'agentd run' at login or boot",
		Long: `Install agentd as a service of this system's service manager, so that
'agentd run' starts by itself, runs as you, restarts when it fails and stops
gracefully. Pair first (agentd pair): a service that is not paired would exit
at once, so install refuses.

By default it is a per-user service running as you: a systemd user unit on
Linux (~/.config/systemd/user/agentd.service), a LaunchAgent on macOS, a
service of the Service Control Manager on Windows. On Linux a user service
runs while you are logged in; to keep it running after you log out (and start
it at boot), turn on lingering: sudo loginctl enable-linger $USER.

With --system --user NAME (as root) it is a system service running as NAME,
for build boxes nobody logs into: /etc/systemd/system/agentd.service with
User=NAME. NAME must have run 'agentd pair' itself.

--print writes the definition it would install to stdout and changes nothing.
$AGENTD_CONFIG_DIR and $AGENTD_STATE_DIR (or --config-dir, --state-dir) are
written into the service's environment when set.`,
		Example: `  agentd install --print
  agentd install
  sudo agentd install --system --user build`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case sf.system && sf.user == "":
				return usageError{errors.New("--system needs --user NAME: the account the service runs as")}
			case sf.user != "" && !sf.system:
				return usageError{errors.New("--user NAME goes with --system (a per-user service runs as you)")}
			}
			m, err := sf.manager()
			if err != nil {
				return err
			}
			if printOnly {
				def, err := m.Definition()
				if err != nil {
					return usageError{err}
				}
				_, err = cmd.OutOrStdout().Write(def)
				return err
			}
			res, err := m.Install(cmd.Context(), !noStart)
			if err != nil {
				return err
			}
			reportInstall(cmd.ErrOrStderr(), m, res)
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&sf.system, "system", false, "install a system service (needs root) running as --user NAME")
	f.StringVar(&sf.user, "user", "", "account the system service runs as (with --system)")
	f.BoolVar(&printOnly, "print", false, "print the service definition to stdout and change nothing")
	f.BoolVar(&noStart, "no-start", false, "install and enable, but do not start it now")
	f.StringVar(&sf.cfgDir, "config-dir", "", "config directory to pin in the service (default: $AGENTD_CONFIG_DIR if set, else the daemon's default)")
	f.StringVar(&sf.stateDir, "state-dir", "", "state directory to pin in the service (default: $AGENTD_STATE_DIR if set, else the daemon's default)")
	return cmd
}

func reportInstall(w io.Writer, m *install.Manager, res install.Result) {
	where := ""
	if res.Path != "" {
		where = " (" + res.Path + ")"
	}
	state := "installed and enabled"
	if res.Started {
		state = "installed, enabled and started"
	}
	fmt.Fprintf(w, "agentd %s as a %s%s.\n", state, scopeWord(m), where)
	if !res.Started {
		fmt.Fprintln(w, "Start it with: agentd start"+systemFlag(m))
	}
	if res.Linger != nil {
		if *res.Linger {
			fmt.Fprintln(w, "Lingering is on: agentd keeps running when you log out and starts at boot.")
		} else {
			fmt.Fprintf(w, "Lingering is off: agentd runs only while you are logged in, and stops when you log out.\n"+
				"To keep it running and start it at boot, run: %s\n", m.LingerCommand())
		}
	}
	fmt.Fprintln(w, "Check it with: agentd status")
}

func scopeWord(m *install.Manager) string {
	switch {
	case m.Kind() == install.KindWindows:
		return "Windows service"
	case m.System():
		return "system service"
	}
	return "per-user service"
}

func systemFlag(m *install.Manager) string {
	if m.System() && m.Kind() != install.KindWindows {
		return " --system"
	}
	return ""
}

// newControlCmd builds uninstall, start, stop and restart: the same flags,
// one Manager method each.
func newControlCmd(use, short, long, done string, do func(*install.Manager, context.Context) error) *cobra.Command {
	sf := serviceFlags{detectSystemTarget: true}
	cmd := &cobra.Command{
		Use:   use + " [--system]",
		Short: short,
		Long: long + `

Without --system it acts on your per-user service or, when you have none, on
the system service (which needs root).`,
		Example: "  agentd " + use + "\n  sudo agentd " + use + " --system",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := sf.manager()
			if err != nil {
				return err
			}
			if err := do(m, cmd.Context()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "agentd %s (%s).\n", done, scopeWord(m))
			return nil
		},
	}
	cmd.Flags().BoolVar(&sf.system, "system", false, "the system service installed with install --system")
	return cmd
}

func newUninstallCmd() *cobra.Command {
	return newControlCmd("uninstall", "Stop the agentd service and remove it from the service manager",
		`Stop the agentd service and remove its definition, so nothing starts it
again. The pairing, the key and the state dir stay: 'agentd unpair' forgets
the pairing. Uninstalling a service that is not installed is an error.`,
		"uninstalled", (*install.Manager).Uninstall)
}

func newStartCmd() *cobra.Command {
	return newControlCmd("start", "Start the installed agentd service",
		"Start the agentd service installed with 'agentd install'.", "started", (*install.Manager).Start)
}

func newStopCmd() *cobra.Command {
	return newControlCmd("stop", "Stop the installed agentd service (gracefully)",
		`Stop the agentd service. agentd stops gracefully: running commands get
SIGTERM, a grace period, then SIGKILL, and the hub is told the machine went
offline. The service starts again at the next login or boot; 'agentd
uninstall' removes it.`, "stopped", (*install.Manager).Stop)
}

func newRestartCmd() *cobra.Command {
	return newControlCmd("restart", "Restart the installed agentd service",
		"Restart the agentd service, e.g. after upgrading the agentd binary.", "restarted", (*install.Manager).Restart)
}
