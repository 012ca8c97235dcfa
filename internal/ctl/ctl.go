// Package ctl is agentctl: the command-line client for every agentd RPC,
// aimed either directly at a daemon (--addr unix:///… or tcp://…) or at a
// machine through the hub (--hub URL --machine ID). cmd/agentctl only calls
// Main.
package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/devdepot-ai/agentd/internal/conformance"
	"github.com/devdepot-ai/agentd/internal/version"
	"github.com/devdepot-ai/agentd/internal/wire"
)

// Exit codes of agentctl itself. exec, sh and attach exit with the remote
// command's code instead, and use ExitFailed for their own failures.
const (
	ExitOK      = 0
	ExitError   = 1                // the operation failed
	ExitUsage   = 2                // the command line is wrong
	ExitTimeout = wire.ExitTimeout // exec: the command timed out (124)
	ExitFailed  = 125              // exec: agentctl itself failed (like docker run)
)

// IO is where a command reads and writes; Main's caller supplies the real ones.
type IO struct {
	In       io.Reader
	Out, Err io.Writer
	// Signals delivers the interrupts agentctl receives (SIGINT, SIGTERM).
	// One stops the command — its calls are cancelled, so the server stops
	// too — and Main returns 128+N (130, 143); exec and sh forward them to
	// the remote process instead once it runs. Nil: none.
	Signals <-chan os.Signal
	// Winch delivers terminal window size changes (SIGWINCH). Nil: none.
	Winch <-chan os.Signal
}

// exitError ends Main with a specific exit code. A nil err prints nothing.
type exitError struct {
	code  int
	err   error
	usage bool // a command-line mistake: exit 2, or 125 for exec-like commands
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usagef is a command-line mistake (exit 2).
func usagef(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...), usage: true}
}

// app holds the global flags and the streams of one invocation.
type app struct {
	io     IO
	target targetFlags
	json   bool
	// failCode is the exit code for agentctl's own failures in this command:
	// ExitError, or ExitFailed for exec-like commands.
	failCode int
	// intr routes IO.Signals: they stop the command unless it takes them.
	intr *interrupts
}

// Main runs agentctl with args (without the program name) and returns the
// exit code. After a signal (IO.Signals) it returns 128+N once the command
// has stopped, or after a short grace if the command is stuck where no
// context reaches; the caller then exits.
func Main(ctx context.Context, args []string, stdio IO) int {
	ctx, intr := watchInterrupts(ctx, stdio.Signals, stopGrace)
	defer intr.stop()
	a := &app{io: stdio, failCode: ExitError, intr: intr}
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetIn(stdio.In)
	root.SetOut(stdio.Out)
	root.SetErr(stdio.Err)
	err, _ := intr.run(func() error { return root.ExecuteContext(ctx) })
	if s := intr.signal(); s != nil {
		return signalExit(s) // what the command failed with is the interruption
	}
	if err == nil {
		return ExitOK
	}
	printError(stdio.Err, err)
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.usage && a.failCode == ExitFailed {
			return ExitFailed // exec's own failures are all 125, like docker run
		}
		return ee.code
	}
	if isUsage(err) {
		if a.failCode == ExitFailed {
			return ExitFailed
		}
		return ExitUsage
	}
	return a.failCode
}

// printError writes the error a command ended with the one way agentctl
// prints errors: "agentctl: " and describe's line, then, after a
// command-line mistake, where to find the usage. An exitError without an
// error prints nothing.
func printError(w io.Writer, err error) {
	usage := isUsage(err)
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err == nil {
			return
		}
		err, usage = ee.err, ee.usage
	}
	fmt.Fprintf(w, "agentctl: %s\n", describe(err))
	if usage {
		fmt.Fprintln(w, "Run 'agentctl --help' for usage.")
	}
}

// isUsage recognises cobra's own argument errors.
func isUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "accepts ", "requires ", "invalid argument", "flag needs", "required flag"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// describe turns an error into one line for a person: an RPC error as the
// status code in words and its message ("permission denied: …"), the same
// words as the conformance suite's.
func describe(err error) string { return conformance.Describe(err) }

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "agentctl",
		Short: "Drive an agentd: run commands, read and edit files, inspect the machine",
		Long: `agentctl talks to an agentd — directly over its socket, or to a paired machine
through the hub — and runs the same operations an AI agent runs.

Target (first match wins):
  --addr unix:///path/agentd.sock | tcp://host:port   direct to a daemon ($AGENTCTL_ADDR)
  --hub URL --machine ID                              through the hub to a machine or sandbox (sb-…)
                                                      ($AGENTD_HUB, $AGENTD_MACHINE), API token in $AGENTD_TOKEN
  --hub URL --env NAME [--conversation ID]            through the hub to the conversation's sandbox of an
                                                      environment ($AGENTD_ENV, $AGENTD_CONVERSATION);
                                                      neither --machine nor --env: the org's default environment
                                                      (exec, sh and python take --env K=V: use $AGENTD_ENV there)
  default: the local daemon's socket, $AGENTD_STATE_DIR/agentd.sock
           (~/.local/state/agentd/agentd.sock)`,
		Example: `  agentctl --addr unix:///tmp/agentd.sock sh 'ls -la | head'
  agentctl exec --timeout 10s -- go test ./...
  echo 'hello' | agentctl write notes/hello.txt
  agentctl edit notes/hello.txt --old hello --new goodbye
  agentctl grep -i 'todo' src --glob '*.go'
  agentctl --json info
  agentctl --hub https://hub.example.com --env py --conversation c-42 info`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		Version:           version.Version,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetVersionTemplate(version.String("agentctl") + "\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: ExitUsage, err: err, usage: true}
	})
	pf := root.PersistentFlags()
	a.target.register(pf)
	pf.BoolVar(&a.json, "json", false, "print machine-readable JSON (one document; one per line for streams)")

	root.AddGroup(&cobra.Group{ID: "proc", Title: "Commands:"}, &cobra.Group{ID: "files", Title: "Files:"}, &cobra.Group{ID: "sys", Title: "Environment:"})
	for _, c := range []*cobra.Command{a.execCmd(), a.shCmd(), a.psCmd(), a.attachCmd(), a.killCmd(), a.pythonCmd()} {
		c.GroupID = "proc"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{a.readCmd(), a.linesCmd(), a.writeCmd(), a.editCmd(), a.lsCmd(), a.statCmd(), a.snapshotCmd(),
		a.rmCmd(), a.mvCmd(), a.mkdirCmd(), a.grepCmd(), a.globCmd(), a.watchCmd()} {
		c.GroupID = "files"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{a.infoCmd(), a.inventoryCmd(), a.portCmd(), a.validateCmd(), a.mcpCmd(), a.versionCmd()} {
		c.GroupID = "sys"
		root.AddCommand(c)
	}
	root.AddGroup(&cobra.Group{ID: "hub", Title: "Hub:"})
	for _, c := range []*cobra.Command{a.machinesCmd(), a.envCmd(), a.sandboxCmd(), a.topCmd(), a.agentCmd(), a.activityCmd(), a.adminCmd()} {
		c.GroupID = "hub"
		root.AddCommand(c)
	}
	return root
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print agentctl's version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(a.io.Out, version.String("agentctl"))
		},
	}
}

// jsonOpts prints zero values too: `jq .exited.exit_code` must say 0, not null.
var jsonOpts = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

// printJSON writes m as one line of JSON.
func (a *app) printJSON(m proto.Message) error {
	b, err := jsonOpts.Marshal(m)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = a.io.Out.Write(b)
	return err
}

// quiet finishes a command that prints nothing on success, or with --json
// the call's response: a.quiet(client.Remove(ctx, req)).
func (a *app) quiet(resp proto.Message, err error) error {
	if err != nil || !a.json {
		return err
	}
	return a.printJSON(resp)
}

// stdinFile returns the real stdin file when In is one.
func (a *app) stdinFile() (*os.File, bool) {
	f, ok := a.io.In.(*os.File)
	return f, ok
}
