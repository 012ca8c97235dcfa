package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/devdepot-ai/agentd/internal/units"
	"github.com/devdepot-ai/agentd/internal/wire"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// execFlags are the options shared by exec and sh.
type execFlags struct {
	cwd     string
	env     []string
	timeout time.Duration
	grace   time.Duration
	tty     bool
	stdin   bool
	detach  bool
	tag     string
	envName string // a bare --env NAME: the hub environment
	// retainHead and retainTail are the retention sizes as written
	// ("" for the daemon's default), parsed by request.
	retainHead, retainTail string
}

func (f *execFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.cwd, "cwd", "", "working directory (default: the daemon's workspace)")
	fl.StringArrayVarP(&f.env, "env", "e", nil, "set an environment variable K=V (repeatable); a NAME without '=' is the hub environment to run in, as agentctl --env NAME")
	fl.DurationVar(&f.timeout, "timeout", 0, "kill the whole process group after this long, e.g. 30s (default: no timeout)")
	fl.DurationVar(&f.grace, "grace", 0, "time between SIGTERM and SIGKILL on timeout (default 5s)")
	fl.BoolVarP(&f.tty, "tty", "t", false, "run in a pty; with a terminal, interactive (raw mode, window size follows)")
	fl.BoolVarP(&f.stdin, "stdin", "i", false, "forward agentctl's stdin to the command")
	fl.BoolVarP(&f.detach, "detach", "d", false, "start and print the process id; do not wait (see ps, attach, kill)")
	fl.StringVar(&f.tag, "tag", "", "label shown by ps")
	fl.StringVar(&f.retainHead, "retain-head", "", "bytes of each output stream's start the daemon keeps for attach, e.g. 64M (default 1M, at most 1G)")
	fl.StringVar(&f.retainTail, "retain-tail", "", "bytes of each output stream's end the daemon keeps for attach, e.g. 64M (default 4M, at most 1G)")
}

// retention parses --retain-head and --retain-tail into req.
func (f *execFlags) retention(req *agentdv1.StartRequest) error {
	for _, r := range []struct {
		flag, val string
		dst       *int64
	}{{"--retain-head", f.retainHead, &req.RetainHeadBytes}, {"--retain-tail", f.retainTail, &req.RetainTailBytes}} {
		if r.val == "" {
			continue
		}
		n, err := units.ParseBytes(r.val)
		if err != nil {
			return usagef("%s: %v", r.flag, err)
		}
		if n == 0 {
			return usagef("%s %s: want a size above 0 (leave it out for the default)", r.flag, r.val)
		}
		*r.dst = n
	}
	return nil
}

// splitEnv reads the --env values of exec, sh and python: KEY=VALUE sets a
// variable; a bare NAME (environment names have no '=') is the hub
// environment to run in, the global --env NAME, which these commands'
// own --env would otherwise hide.
func splitEnv(vals []string) (vars map[string]string, envName string, err error) {
	for _, kv := range vals {
		k, v, ok := strings.Cut(kv, "=")
		switch {
		case !ok && k != "" && envName == "":
			envName = k
		case !ok && k != "":
			return nil, "", usagef("--env %q: one environment name (%s given already); variables are KEY=VALUE", kv, envName)
		case k == "":
			return nil, "", usagef("--env %q: want KEY=VALUE, or an environment NAME", kv)
		default:
			if vars == nil {
				vars = map[string]string{}
			}
			vars[k] = v
		}
	}
	return vars, envName, nil
}

// envNameNeedsHub refuses a bare --env NAME when no hub routes the call.
func envNameNeedsHub(name string, viaHub bool) error {
	if name != "" && !viaHub {
		return usagef("--env %q: want KEY=VALUE (a bare NAME picks a hub environment, with --hub)", name)
	}
	return nil
}

// request builds the StartRequest; viaHub says whether calls go through a
// hub (where a bare --env NAME means something).
func (f *execFlags) request(viaHub bool) (*agentdv1.StartRequest, error) {
	req := &agentdv1.StartRequest{Cwd: f.cwd, Tag: f.tag, OpenStdin: f.stdin || f.tty}
	vars, envName, err := splitEnv(f.env)
	if err != nil {
		return nil, err
	}
	req.Env, f.envName = vars, envName
	if err := envNameNeedsHub(envName, viaHub); err != nil {
		return nil, err
	}
	if f.timeout < 0 || f.grace < 0 {
		return nil, usagef("--timeout and --grace must not be negative")
	}
	if f.timeout > 0 {
		req.Timeout = durationpb.New(f.timeout)
	}
	if f.grace > 0 {
		req.KillGrace = durationpb.New(f.grace)
	}
	if err := f.retention(req); err != nil {
		return nil, err
	}
	return req, nil
}

func (a *app) execCmd() *cobra.Command {
	var f execFlags
	cmd := &cobra.Command{
		Use:   "exec [flags] -- CMD [ARG...]",
		Short: "Run a program and stream its output; exit with its exit code",
		Long: `Run a program on the target, directly (no shell), in its own process group.

stdout and stderr arrive on agentctl's stdout and stderr as they are written.
agentctl exits with the command's exit code; 124 when --timeout killed it;
128+N when signal N killed it; 125 when agentctl itself failed.

Ctrl-C sends SIGINT to the remote process group and keeps streaming; a second
Ctrl-C detaches and leaves the command running (see 'agentctl attach').
SIGTERM is sent on the same way. Before the command has started (a hub may
be bringing up a sandbox), either signal stops agentctl: exit 130 or 143.

The daemon keeps the first 1 MiB and the last 4 MiB of each output stream for
'agentctl attach' (and for agentctl's own reattach when a connection drops);
--retain-head and --retain-tail keep more, up to 1 GiB each.`,
		Example: `  agentctl exec -- ls -la /tmp
  agentctl exec --cwd src --timeout 5m -- go test ./...
  agentctl exec --env GOFLAGS=-count=1 -- go test ./...
  agentctl exec -t -- htop                      # interactive, in a pty
  cat data.csv | agentctl exec -i -- wc -l      # forward stdin
  agentctl exec -d --tag build -- make all      # start in the background
  agentctl exec --retain-head 1G -- ./dump.sh   # keep 1 GiB of output for attach --from 0`,
		Args: needCommand("exec needs a command: agentctl exec [flags] -- CMD [ARG...]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := f.request(a.viaHub())
			if err != nil {
				return err
			}
			req.Argv = args
			return a.runProcess(cmd.Context(), req, &f)
		},
	}
	cmd.Flags().SetInterspersed(false)
	f.register(cmd)
	a.exitLike(cmd)
	return cmd
}

func (a *app) shCmd() *cobra.Command {
	var f execFlags
	cmd := &cobra.Command{
		Use:   "sh [flags] 'COMMAND STRING'",
		Short: "Run a command line through the target's shell ($SHELL -c)",
		Long: `Run a command line through the target user's shell ($SHELL -c, default /bin/sh),
so pipes, globs, redirections and variables work. Exit codes as for exec.

The daemon keeps the first 1 MiB and the last 4 MiB of each output stream for
'agentctl attach' (and for agentctl's own reattach when a connection drops);
--retain-head and --retain-tail keep more, up to 1 GiB each.`,
		Example: `  agentctl sh 'ls *.go | wc -l'
  agentctl sh --timeout 1m 'make test 2>&1 | tail -20'
  agentctl sh --cwd /tmp 'echo $HOME > where.txt'`,
		Args: needCommand("sh needs a command string: agentctl sh 'COMMAND STRING'"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := f.request(a.viaHub())
			if err != nil {
				return err
			}
			req.Command = strings.Join(args, " ")
			return a.runProcess(cmd.Context(), req, &f)
		},
	}
	f.register(cmd)
	a.exitLike(cmd)
	return cmd
}

// needCommand refuses an exec-like command without arguments, exiting 125.
func needCommand(msg string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) == 0 {
			return &exitError{code: ExitFailed, err: errors.New(msg), usage: true}
		}
		return nil
	}
}

// exitLike makes agentctl's own failures in cmd exit 125, like docker run.
func (a *app) exitLike(cmd *cobra.Command) {
	cmd.PreRun = func(*cobra.Command, []string) { a.failCode = ExitFailed }
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: ExitFailed, err: err, usage: true}
	})
}

// exitCode is the exit code agentctl reports for a finished process.
func exitCode(e *agentdv1.Exited) int {
	return wire.ExitCode(int(e.GetExitCode()), int(e.GetSignalNumber()), e.GetTimedOut())
}

func (a *app) runProcess(ctx context.Context, req *agentdv1.StartRequest, f *execFlags) error {
	if f.envName != "" {
		a.target.env = f.envName
	}
	c, err := a.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	procs := agentdv1.NewProcessServiceClient(c)

	var restore func()
	if f.tty {
		req.Pty = &agentdv1.PtySize{Rows: 24, Cols: 80}
		if in, ok := a.stdinFile(); ok && term.IsTerminal(int(in.Fd())) {
			if w, h, err := term.GetSize(int(in.Fd())); err == nil {
				req.Pty = &agentdv1.PtySize{Rows: uint32(h), Cols: uint32(w)}
			}
			if !f.detach {
				if st, err := term.MakeRaw(int(in.Fd())); err == nil {
					restore = func() { _ = term.Restore(int(in.Fd()), st) }
					defer restore()
				}
			}
		}
	}

	sctx, cancel := context.WithCancel(c.ctx(ctx))
	defer cancel()
	stream, err := procs.Start(sctx, req)
	if err != nil {
		return err
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	started := first.GetEvent().GetStarted()
	if started == nil {
		return errors.New("daemon did not report the process start")
	}
	if f.detach {
		if a.json {
			return a.printJSON(started)
		}
		fmt.Fprintln(a.io.Out, started.GetId())
		return nil
	}
	if req.OpenStdin {
		go a.forwardStdin(c.ctx(ctx), procs, started.GetId())
	}
	if f.tty && restore != nil {
		stopResize := a.followWindowSize(c.ctx(ctx), procs, started.GetId())
		defer stopResize()
	}
	// Until the process started, a signal stopped agentctl (a hub bringing
	// up a sandbox can take a while); from now on it goes to the process.
	sigs, release := a.takeSignals()
	defer release()
	return a.follow(ctx, c, procs, started, sigs, func() (*agentdv1.ProcessEvent, error) {
		m, err := stream.Recv()
		return m.GetEvent(), err
	})
}

// forwardStdin copies agentctl's stdin to the process, then closes its stdin.
func (a *app) forwardStdin(ctx context.Context, procs agentdv1.ProcessServiceClient, id string) {
	in, err := procs.Input(ctx)
	if err != nil {
		return
	}
	if err := in.Send(&agentdv1.InputRequest{Id: id}); err != nil {
		return
	}
	buf := make([]byte, wire.ChunkSize)
	for {
		n, rerr := a.io.In.Read(buf)
		if n > 0 {
			if in.Send(&agentdv1.InputRequest{Data: buf[:n]}) != nil {
				return
			}
		}
		if rerr != nil {
			_ = in.Send(&agentdv1.InputRequest{Eof: true})
			_, _ = in.CloseAndRecv()
			return
		}
	}
}

// streamWriter writes a process's output once, in order, across reattaches.
type streamWriter struct {
	next map[agentdv1.OutputStream]int64
}

func (w *streamWriter) write(a *app, o *agentdv1.Output) error {
	data, off := o.GetData(), o.GetOffset()
	next := w.next[o.GetStream()]
	if end := off + int64(len(data)); end <= next {
		return nil // already written before a reattach
	} else if off < next {
		data = data[next-off:]
	}
	w.next[o.GetStream()] = off + int64(len(o.GetData()))
	dst := a.io.Out
	if o.GetStream() == agentdv1.OutputStream_OUTPUT_STREAM_STDERR {
		dst = a.io.Err
	}
	_, err := dst.Write(data)
	return err
}

// follow prints a process's events until it exits, reattaching when the
// connection drops, and turns the exit into agentctl's exit code. Signals
// from sigs are forwarded to the process group: the first interrupt is
// sent on, a second one detaches. With sigs nil (attach), a signal cancels
// ctx and follow returns, leaving the process be.
func (a *app) follow(ctx context.Context, c *conn, procs agentdv1.ProcessServiceClient, started *agentdv1.Started,
	sigs <-chan os.Signal, recv func() (*agentdv1.ProcessEvent, error)) error {
	id := started.GetId()
	if a.json {
		if err := a.printJSON(&agentdv1.ProcessEvent{Event: &agentdv1.ProcessEvent_Started{Started: started}}); err != nil {
			return err
		}
	}
	w := &streamWriter{next: map[agentdv1.OutputStream]int64{}}
	events := make(chan eventOrErr, 1)
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pump := func(recv func() (*agentdv1.ProcessEvent, error)) {
		for {
			ev, err := recv()
			select {
			case events <- eventOrErr{ev, err}:
			case <-fctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}
	go pump(recv)

	interrupts := 0
	var reconnectSince time.Time
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case sig := <-sigs:
			interrupts++
			if interrupts > 1 {
				fmt.Fprintf(a.io.Err, "\nagentctl: detached; %s is still running: agentctl attach %s\n", id, id)
				return &exitError{code: ExitFailed}
			}
			name := "INT"
			if s, ok := sig.(syscall.Signal); ok && s == syscall.SIGTERM {
				name = "TERM"
			}
			if _, err := procs.Signal(c.ctx(ctx), &agentdv1.SignalRequest{Id: id, Signal: name}); err != nil {
				fmt.Fprintf(a.io.Err, "agentctl: could not signal %s: %s\n", id, describe(err))
			}
		case e := <-events:
			if e.err != nil {
				if e.err == io.EOF {
					return fmt.Errorf("stream of %s ended before the process exited; agentctl attach %s", id, id)
				}
				if !connectionLost(e.err) || ctx.Err() != nil {
					return e.err
				}
				// The connection dropped (daemon restart, tunnel loss): the
				// command keeps running, so reattach where we left off.
				if reconnectSince.IsZero() {
					reconnectSince = time.Now()
					fmt.Fprintf(a.io.Err, "agentctl: connection lost (%s); reattaching to %s…\n", describe(e.err), id)
				}
				if time.Since(reconnectSince) > time.Minute {
					return fmt.Errorf("gave up reattaching to %s after 1m: %s; later: agentctl attach %s", id, describe(e.err), id)
				}
				select {
				case <-time.After(500 * time.Millisecond):
				case <-ctx.Done():
					return ctx.Err()
				}
				req := &agentdv1.AttachRequest{Id: id}
				req.FromOffset = w.next[agentdv1.OutputStream_OUTPUT_STREAM_STDOUT] + w.next[agentdv1.OutputStream_OUTPUT_STREAM_PTY]
				errOff := w.next[agentdv1.OutputStream_OUTPUT_STREAM_STDERR]
				req.StderrFromOffset = &errOff
				st, err := procs.Attach(c.ctx(fctx), req)
				if err != nil {
					go func() {
						select {
						case events <- eventOrErr{nil, err}:
						case <-fctx.Done():
						}
					}()
					continue
				}
				go pump(func() (*agentdv1.ProcessEvent, error) {
					m, err := st.Recv()
					return m.GetEvent(), err
				})
				continue
			}
			reconnectSince = time.Time{}
			ev := e.ev
			if a.json {
				if ev.GetStarted() != nil {
					continue
				}
				if err := a.printJSON(ev); err != nil {
					return err
				}
				if x := ev.GetExited(); x != nil {
					return exitWith(exitCode(x))
				}
				continue
			}
			switch {
			case ev.GetOutput() != nil:
				if err := w.write(a, ev.GetOutput()); err != nil {
					return err
				}
			case ev.GetGap() != nil:
				g := ev.GetGap()
				if g.GetOffset()+g.GetBytes() > w.next[g.GetStream()] {
					fmt.Fprintf(a.io.Err, "\n[agentctl: %d bytes of %s not retained]\n", g.GetBytes(), streamName(g.GetStream()))
					w.next[g.GetStream()] = g.GetOffset() + g.GetBytes()
				}
			case ev.GetExited() != nil:
				if r := ev.GetExited().GetReason(); r != "" {
					fmt.Fprintf(a.io.Err, "\n[agentctl: %s]\n", r)
				}
				return exitWith(exitCode(ev.GetExited()))
			}
		}
	}
}

// connectionLost says whether err ended a stream because the connection
// to the daemon broke (the command goes on): UNAVAILABLE, or a stream reset
// with INTERNAL_ERROR, which is how a reverse proxy (nginx's grpc_pass)
// ends a call whose upstream died mid-response — grpc-go reports that as
// INTERNAL with this fixed message, and has no error type for it.
func connectionLost(err error) bool {
	st := status.Convert(err)
	switch st.Code() {
	case codes.Unavailable:
		return true
	case codes.Internal:
		return strings.HasPrefix(st.Message(), "stream terminated by RST_STREAM with error code: INTERNAL_ERROR")
	}
	return false
}

type eventOrErr struct {
	ev  *agentdv1.ProcessEvent
	err error
}

func exitWith(code int) error {
	if code == 0 {
		return nil
	}
	return &exitError{code: code}
}

func streamName(s agentdv1.OutputStream) string {
	switch s {
	case agentdv1.OutputStream_OUTPUT_STREAM_STDERR:
		return "stderr"
	case agentdv1.OutputStream_OUTPUT_STREAM_PTY:
		return "pty output"
	}
	return "stdout"
}

func (a *app) attachCmd() *cobra.Command {
	var from int64
	cmd := &cobra.Command{
		Use:   "attach ID",
		Short: "Replay a process's output from an offset and follow it; exit with its exit code",
		Long: `Replay the retained output of a process (by default from the start) and follow
it live until it exits. agentctl then exits with the process's exit code, as
exec does. Output dropped from retention (the middle of a very long output)
is reported as a gap on stderr.

Ctrl-C (SIGINT) or SIGTERM stops following and exits 130 or 143; the process
is not signalled and keeps running (agentctl kill ID stops it).

In a hub's sandbox, a process that a stop, archive or delete of the sandbox
ended is answered for by the hub: attach prints why on stderr
("[agentctl: sandbox stopped: idle 30m]") and exits as for a process killed
by SIGTERM (143); its output went with the sandbox.`,
		Example: `  agentctl attach p-1a2b3c4d5e
  agentctl attach p-1a2b3c4d5e --from 1048576`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if from < 0 {
				return &exitError{code: ExitFailed, err: errors.New("--from must not be negative")}
			}
			c, err := a.dial()
			if err != nil {
				return err
			}
			defer c.Close()
			procs := agentdv1.NewProcessServiceClient(c)
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			st, err := procs.Attach(c.ctx(ctx), &agentdv1.AttachRequest{Id: args[0], FromOffset: from})
			if err != nil {
				return err
			}
			m, err := st.Recv()
			if err != nil {
				return err
			}
			started := m.GetEvent().GetStarted()
			if started == nil {
				return errors.New("daemon did not send the process's start first")
			}
			err = a.follow(cmd.Context(), c, procs, started, nil, func() (*agentdv1.ProcessEvent, error) {
				m, err := st.Recv()
				return m.GetEvent(), err
			})
			if a.interrupted() {
				id := started.GetId()
				fmt.Fprintf(a.io.Err, "\nagentctl: stopped following %s; it was not signalled (follow it again: agentctl attach %s; stop it: agentctl kill %s)\n", id, id, id)
			}
			return err
		},
	}
	cmd.Flags().Int64Var(&from, "from", 0, "byte offset to replay from (stdout and stderr)")
	a.exitLike(cmd)
	return cmd
}

func (a *app) psCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ps",
		Short: "List running and recently finished processes, oldest first",
		Long: `One process per line: id, state (running, exited N, killed SIG, timed out),
pid, start time and the command line, oldest first. Finished processes stay
listed (and attachable) for at least 10 minutes. In a hub's sandbox, the
processes a stop, archive or delete of the sandbox ended are listed too,
"killed TERM (sandbox stopped by alice)", for a week.`,
		Example: `  agentctl ps
  agentctl --json ps`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.dial()
			if err != nil {
				return err
			}
			defer c.Close()
			resp, err := agentdv1.NewProcessServiceClient(c).List(c.ctx(cmd.Context()), &agentdv1.ProcessServiceListRequest{})
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(resp)
			}
			tw := tabwriter.NewWriter(a.io.Out, 0, 4, 2, ' ', 0)
			for _, p := range resp.GetProcesses() {
				line := p.GetCommand()
				if line == "" {
					line = shellJoin(p.GetArgv())
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", p.GetId(), processState(p), p.GetPid(),
					p.GetStartTime().AsTime().Local().Format(time.DateTime), line)
			}
			return tw.Flush()
		},
	}
}

// processState is ps's state column.
func processState(p *agentdv1.ProcessInfo) string {
	if p.GetState() == agentdv1.ProcessState_PROCESS_STATE_RUNNING {
		return "running"
	}
	x := p.GetExited()
	state := fmt.Sprintf("exited %d", x.GetExitCode())
	switch {
	case x.GetTimedOut():
		state = "timed out"
	case x.GetSignal() != "":
		state = "killed " + x.GetSignal()
	}
	if r := x.GetReason(); r != "" {
		state += " (" + r + ")"
	}
	return state
}

// shellJoin quotes argv the way a person would type it.
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, s := range argv {
		if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`|&;<>()*?[]{}!#~") {
			q[i] = s
			continue
		}
		q[i] = "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

func (a *app) killCmd() *cobra.Command {
	var sig string
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "kill ID",
		Short: "Signal a process's whole group (TERM, then KILL after the grace period)",
		Long: `Send a signal to every process in the process's group. TERM (the default) is
followed by KILL after the grace period (default 5s) if anything is still
alive; KILL is immediate; other signals (INT, HUP, USR1, …) are sent as is.`,
		Example: `  agentctl kill p-1a2b3c4d5e
  agentctl kill p-1a2b3c4d5e --signal KILL
  agentctl kill p-1a2b3c4d5e --signal INT`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if grace < 0 {
				return usagef("--grace must not be negative")
			}
			c, err := a.dial()
			if err != nil {
				return err
			}
			defer c.Close()
			req := &agentdv1.SignalRequest{Id: args[0], Signal: sig}
			if grace > 0 {
				req.Grace = durationpb.New(grace)
			}
			return a.quiet(agentdv1.NewProcessServiceClient(c).Signal(c.ctx(cmd.Context()), req))
		},
	}
	cmd.Flags().StringVarP(&sig, "signal", "s", "TERM", "signal name or number: TERM, KILL, INT, HUP, …")
	cmd.Flags().DurationVar(&grace, "grace", 0, "with TERM: time before KILL follows (default: the process's, 5s)")
	return cmd
}

// followWindowSize sends the terminal's size to the process's pty whenever
// it changes (SIGWINCH). The returned func stops it.
func (a *app) followWindowSize(ctx context.Context, procs agentdv1.ProcessServiceClient, id string) func() {
	in, ok := a.stdinFile()
	if !ok || a.io.Winch == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-a.io.Winch:
				if w, h, err := term.GetSize(int(in.Fd())); err == nil {
					_, _ = procs.Resize(ctx, &agentdv1.ResizeRequest{Id: id, Size: &agentdv1.PtySize{Rows: uint32(h), Cols: uint32(w)}})
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}
