package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"google.golang.org/protobuf/types/known/durationpb"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// maxPythonCode is the largest code agentctl sends (the daemon's limit).
const maxPythonCode = 10 << 20

// pythonFlags are the options of agentctl python.
type pythonFlags struct {
	code     string
	codeSet  bool
	session  string
	timeout  time.Duration
	cwd      string
	env      []string
	reset    bool
	close    bool
	list     bool
	codeFrom string // where the code came from, for messages
}

func (a *app) pythonCmd() *cobra.Command {
	var f pythonFlags
	cmd := &cobra.Command{
		Use:   "python [-c CODE | FILE | -] [--session S] [--timeout D]",
		Short: "Run Python code on the target, once or in a persistent session",
		Long: `Run Python code with the target's python3. The code comes from -c, from FILE
(read here, run there), or from stdin (no FILE, or FILE "-").

The code's stdout goes to stdout and its stderr to stderr as they are written.
When the code ends with an expression, its repr is printed on stdout, as in a
notebook (a trailing ';' hides it). An exception prints its traceback on stderr.

Without --session every run gets a fresh interpreter. With --session S the run
goes to the persistent interpreter S, created on first use, which keeps its
globals between runs like a notebook kernel; sessions end after 30 minutes
without runs. --reset restarts S (clearing its globals) before the code runs,
--close ends S after it; both work without code too. --list-sessions lists
the live sessions.

--timeout interrupts the run with KeyboardInterrupt; a session survives that.
A run that still does not stop is killed, and its session with it.

Exit status: 0 when the code ran without an exception, 1 when it raised one
(SystemExit with a non-zero code included), 124 when it timed out, 130 when
Ctrl-C interrupted it, 125 when agentctl itself failed, 2 for a usage error.`,
		Example: `  agentctl python -c 'import sys; sys.version'
  agentctl python analysis.py --timeout 5m
  echo 'print(6 * 7)' | agentctl python
  agentctl python --session nb -c 'import pandas as pd; df = pd.read_csv("data.csv")'
  agentctl python --session nb -c 'df.describe()'
  agentctl python --session nb --reset
  agentctl python --session nb --close
  agentctl python --list-sessions`,
		Args: cobra.MaximumNArgs(1),
		PreRun: func(*cobra.Command, []string) {
			a.failCode = ExitFailed
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			f.codeSet = cmd.Flags().Changed("command")
			return a.runPython(cmd, &f, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.code, "command", "c", "", "the code to run")
	fl.StringVarP(&f.session, "session", "s", "", "run in the persistent session `S` (1-64 characters: A-Z a-z 0-9 _ . -)")
	fl.DurationVar(&f.timeout, "timeout", 0, "interrupt the run after this long, e.g. 30s (default: no timeout)")
	fl.StringVar(&f.cwd, "cwd", "", "working directory (default: the workspace; a session stays where it was)")
	fl.StringArrayVarP(&f.env, "env", "e", nil, "set an environment variable K=V (repeatable; in a session it stays set); a NAME without '=' is the hub environment")
	fl.BoolVar(&f.reset, "reset", false, "restart the session's interpreter, clearing its globals, before running the code")
	fl.BoolVar(&f.close, "close", false, "end the session after running the code")
	fl.BoolVar(&f.list, "list-sessions", false, "list the live sessions")
	return cmd
}

func (a *app) runPython(cmd *cobra.Command, f *pythonFlags, args []string) error {
	if f.list {
		if f.codeSet || len(args) > 0 || f.session != "" || f.reset || f.close {
			return usagef("--list-sessions takes no code, --session, --reset or --close")
		}
		return a.call(cmd, a.listPythonSessions)
	}
	if (f.reset || f.close) && f.session == "" {
		return usagef("--reset and --close need --session S")
	}
	if f.timeout < 0 {
		return usagef("--timeout must not be negative")
	}
	if f.codeSet && len(args) > 0 {
		return usagef("give the code either with -c or as FILE, not both")
	}
	req := &agentdv1.RunRequest{Session: f.session, Cwd: f.cwd}
	if f.timeout > 0 {
		req.Timeout = durationpb.New(f.timeout)
	}
	vars, envName, err := splitEnv(f.env)
	if err != nil {
		return err
	}
	req.Env = vars
	if err := envNameNeedsHub(envName, a.viaHub()); err != nil {
		return err
	}
	if envName != "" {
		a.target.env = envName
	}
	// With --reset or --close alone there is no code to run, and stdin is
	// not read.
	haveCode := f.codeSet || len(args) > 0 || !(f.reset || f.close)
	if haveCode {
		code, err := a.pythonCode(cmd.Context(), f, args)
		if err != nil {
			return err
		}
		req.Code = code
	}

	return a.call(cmd, func(ctx context.Context, c *conn) error {
		py := agentdv1.NewPythonServiceClient(c)
		if f.reset {
			if _, err := py.ResetSession(ctx, &agentdv1.ResetSessionRequest{Session: f.session}); err != nil {
				return err
			}
		}
		var runErr error
		if haveCode {
			runErr = a.pythonRun(ctx, py, req)
		}
		if f.close {
			var ee *exitError
			if runErr != nil && !errors.As(runErr, &ee) {
				return runErr // the run itself failed; leave the session be
			}
			if _, err := py.CloseSession(ctx, &agentdv1.CloseSessionRequest{Session: f.session}); err != nil {
				return err
			}
		}
		return runErr
	})
}

// pythonCode reads the code from -c, FILE or stdin.
func (a *app) pythonCode(ctx context.Context, f *pythonFlags, args []string) (string, error) {
	if f.codeSet {
		f.codeFrom = "-c"
		if len(f.code) > maxPythonCode {
			return "", usagef("-c: code of %d bytes; the limit is 10 MiB", len(f.code))
		}
		return f.code, nil
	}
	var r io.Reader
	if len(args) == 0 || args[0] == "-" {
		f.codeFrom = "stdin"
		if in, ok := a.stdinFile(); ok && term.IsTerminal(int(in.Fd())) {
			fmt.Fprintln(a.io.Err, "agentctl: reading Python code from the terminal; end it with Ctrl-D")
		}
		r = interruptible(ctx, a.io.In)
	} else {
		f.codeFrom = args[0]
		file, err := os.Open(args[0])
		if err != nil {
			return "", usagef("%v", err)
		}
		defer file.Close()
		r = file
	}
	b, err := io.ReadAll(io.LimitReader(r, maxPythonCode+1))
	if err != nil {
		return "", fmt.Errorf("read code from %s: %w", f.codeFrom, err)
	}
	if len(b) > maxPythonCode {
		return "", usagef("code from %s is larger than the limit of 10 MiB", f.codeFrom)
	}
	return string(b), nil
}

// pythonRun runs req and prints its events; the outcome becomes the exit
// code.
func (a *app) pythonRun(ctx context.Context, py agentdv1.PythonServiceClient, req *agentdv1.RunRequest) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := py.Run(ctx, req)
	if err != nil {
		return err
	}
	type recvd struct {
		m   *agentdv1.RunResponse
		err error
	}
	events := make(chan recvd)
	go func() {
		for {
			m, err := st.Recv()
			select {
			case events <- recvd{m, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		var e recvd
		select {
		case <-ctx.Done():
			// A signal cancelled the call (Main exits 128+N), which makes
			// the daemon interrupt the run (KeyboardInterrupt, then a kill
			// if it will not stop).
			if a.interrupted() {
				fmt.Fprintln(a.io.Err, "\nagentctl: interrupted; the run is being stopped")
			}
			return ctx.Err()
		case e = <-events:
		}
		if e.err == io.EOF {
			return errors.New("the daemon ended the run without reporting its end")
		}
		if e.err != nil {
			return e.err
		}
		if a.json {
			if err := a.printJSON(e.m); err != nil {
				return err
			}
		}
		switch ev := e.m.GetEvent().(type) {
		case *agentdv1.RunResponse_Output:
			if a.json {
				continue
			}
			dst := a.io.Out
			if ev.Output.GetStream() == agentdv1.PythonStream_PYTHON_STREAM_STDERR {
				dst = a.io.Err
			}
			if _, err := dst.Write(ev.Output.GetData()); err != nil {
				return err
			}
		case *agentdv1.RunResponse_Result:
			if !a.json {
				if _, err := fmt.Fprintln(a.io.Out, ev.Result.GetRepr()); err != nil {
					return err
				}
			}
		case *agentdv1.RunResponse_Error:
			if !a.json {
				a.printPythonError(ev.Error)
			}
		case *agentdv1.RunResponse_Done:
			return a.pythonDone(req, ev.Done)
		}
	}
}

// printPythonError prints an exception as Python would: its traceback, or
// "Name: value" when there is none.
func (a *app) printPythonError(e *agentdv1.PythonError) {
	text := e.GetTraceback()
	if text == "" {
		text = e.GetName()
		if e.GetValue() != "" {
			text += ": " + e.GetValue()
		}
	}
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	fmt.Fprint(a.io.Err, text)
}

// pythonDone reports how the run ended and turns it into the exit code.
func (a *app) pythonDone(req *agentdv1.RunRequest, d *agentdv1.PythonDone) error {
	if !a.json {
		switch {
		case d.GetTimedOut() && req.GetSession() != "" && d.GetSessionAlive():
			fmt.Fprintf(a.io.Err, "agentctl: timed out after %s; session %s lives on\n", req.GetTimeout().AsDuration(), req.GetSession())
		case d.GetTimedOut():
			fmt.Fprintf(a.io.Err, "agentctl: timed out after %s\n", req.GetTimeout().AsDuration())
		case req.GetSession() != "" && !d.GetSessionAlive() && !d.GetFailed():
			fmt.Fprintf(a.io.Err, "agentctl: session %s ended: its interpreter exited\n", req.GetSession())
		}
	}
	switch {
	case d.GetTimedOut():
		return &exitError{code: ExitTimeout}
	case d.GetFailed():
		return &exitError{code: ExitError}
	}
	return nil
}

func (a *app) listPythonSessions(ctx context.Context, c *conn) error {
	resp, err := agentdv1.NewPythonServiceClient(c).ListSessions(ctx, &agentdv1.ListSessionsRequest{})
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(resp)
	}
	if len(resp.GetSessions()) == 0 {
		fmt.Fprintln(a.io.Err, "no python sessions")
		return nil
	}
	tw := tabwriter.NewWriter(a.io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tPID\tRUNS\tSTATE\tCREATED\tLAST RUN")
	for _, s := range resp.GetSessions() {
		state := "idle"
		if s.GetBusy() {
			state = "running"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", s.GetName(), s.GetPid(), s.GetRuns(), state,
			s.GetCreated().AsTime().Local().Format(time.DateTime), s.GetLastUsed().AsTime().Local().Format(time.DateTime))
	}
	return tw.Flush()
}
