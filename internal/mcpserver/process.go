package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/devdepot-ai/agentd/internal/wire"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// Output limits of a tool result. Clients pass a tool's whole result to
// the model, and the popular ones cap it (Claude Code warns above 10,000
// tokens and refuses above 25,000 by default): 32 KiB of text is about
// 8,000–10,000 tokens, under both, and enough for a build's first error
// and its last lines. The middle is cut, and the cut marked.
const (
	headBytes = 16 << 10
	tailBytes = 16 << 10
	// progressBytes bounds the output text of one progress notification.
	progressBytes = 8 << 10
)

// Waits of exec, sh and attach: how long a call follows a command before
// it returns with the command still running (its id, for attach). Many
// clients give up on a tool call after 60 s.
const (
	defaultWait = 50 * time.Second
	maxWait     = 10 * time.Minute
)

// ExecInput is exec's arguments.
type ExecInput struct {
	Argv []string `json:"argv" jsonschema:"the program and its arguments, run directly without a shell, e.g. [\"go\",\"test\",\"./...\"]"`
	RunOptions
}

// ShInput is sh's arguments.
type ShInput struct {
	Command string `json:"command" jsonschema:"a command line for the target user's shell ($SHELL -c): pipes, redirections, globs and variables work, e.g. \"make test 2>&1 | tail -50\""`
	RunOptions
}

// RunOptions are the options exec and sh share.
type RunOptions struct {
	Cwd            string            `json:"cwd,omitempty" jsonschema:"working directory; relative to the workspace; default the workspace"`
	Env            map[string]string `json:"env,omitempty" jsonschema:"environment variables to set, NAME: value"`
	TimeoutSeconds float64           `json:"timeout_seconds,omitempty" jsonschema:"kill the command (TERM, then KILL) after this many seconds; exit code 124 then; default none"`
	WaitSeconds    float64           `json:"wait_seconds,omitempty" jsonschema:"how long this call waits for the command (default 50, at most 600); a command still running then keeps running and the result gives its id: call attach to follow it or kill to stop it"`
	Stdin          string            `json:"stdin,omitempty" jsonschema:"text to give the command on its standard input (default none)"`
}

// ProcessResult is what exec, sh and attach return besides the text.
type ProcessResult struct {
	ID          string `json:"id" jsonschema:"the process id, for attach and kill"`
	PID         int32  `json:"pid,omitempty" jsonschema:"the operating system's process id"`
	Running     bool   `json:"running" jsonschema:"the command was still running when the call returned"`
	ExitCode    *int   `json:"exit_code,omitempty" jsonschema:"the exit code: 124 when timeout_seconds killed it, 128+N when signal N did"`
	Signal      string `json:"signal,omitempty" jsonschema:"the signal that killed it, e.g. KILL"`
	TimedOut    bool   `json:"timed_out,omitempty" jsonschema:"timeout_seconds killed it"`
	Reason      string `json:"reason,omitempty" jsonschema:"why the system ended it, e.g. out of memory (limit 512 MiB)"`
	OutputBytes int64  `json:"output_bytes" jsonschema:"bytes of output this call saw"`
	CutBytes    int64  `json:"cut_bytes,omitempty" jsonschema:"bytes cut from the middle of the output shown"`
	NextOffset  int64  `json:"next_offset,omitempty" jsonschema:"with running: the stdout offset to pass to attach as from_offset to see only what comes next"`
}

const execDoc = `Run a program with arguments, without a shell, on the agentd machine or sandbox, and wait for it.
Returns its output (stdout and stderr interleaved; a long output keeps its first and last 16 KiB, the middle cut
and marked), its exit code and its process id. A command still running after wait_seconds keeps running: follow
it with attach, stop it with kill. Use sh for pipes and redirections.`

const shDoc = `Run a command line through the shell ($SHELL -c) on the agentd machine or sandbox, and wait for it.
Returns its output (stdout and stderr interleaved; a long output keeps its first and last 16 KiB, the middle cut
and marked), its exit code and its process id. A command still running after wait_seconds keeps running: follow
it with attach, stop it with kill.`

const attachDoc = `Follow a command started by exec or sh (by its id) until it exits or wait_seconds pass, and return its
output (replayed from from_offset; first and last 16 KiB) with its exit code, or running: true again.`

const killDoc = `Signal a command's whole process group by its id: TERM (the default, followed by KILL after 5 s if
anything is left), KILL, INT, HUP, …`

func (s *Server) exec(ctx context.Context, req *mcp.CallToolRequest, in ExecInput) (*mcp.CallToolResult, ProcessResult, error) {
	if len(in.Argv) == 0 || in.Argv[0] == "" {
		return nil, ProcessResult{}, errors.New("argv is empty: name the program, e.g. [\"ls\",\"-la\"]; use sh for a command line")
	}
	return s.start(ctx, req, &agentdv1.StartRequest{Argv: in.Argv}, in.RunOptions)
}

func (s *Server) sh(ctx context.Context, req *mcp.CallToolRequest, in ShInput) (*mcp.CallToolResult, ProcessResult, error) {
	if strings.TrimSpace(in.Command) == "" {
		return nil, ProcessResult{}, errors.New("command is empty")
	}
	return s.start(ctx, req, &agentdv1.StartRequest{Command: in.Command}, in.RunOptions)
}

// waitOf checks and defaults a wait_seconds.
func waitOf(sec float64) (time.Duration, error) {
	switch {
	case sec < 0:
		return 0, errors.New("wait_seconds must not be negative")
	case sec == 0:
		return defaultWait, nil
	}
	d := time.Duration(sec * float64(time.Second))
	if d > maxWait {
		return 0, fmt.Errorf("wait_seconds %v: at most %v", sec, maxWait.Seconds())
	}
	return d, nil
}

func (s *Server) start(ctx context.Context, req *mcp.CallToolRequest, sr *agentdv1.StartRequest, o RunOptions) (*mcp.CallToolResult, ProcessResult, error) {
	wait, err := waitOf(o.WaitSeconds)
	if err != nil {
		return nil, ProcessResult{}, err
	}
	if o.TimeoutSeconds < 0 {
		return nil, ProcessResult{}, errors.New("timeout_seconds must not be negative")
	}
	sr.Cwd, sr.Env, sr.Stdin = o.Cwd, o.Env, []byte(o.Stdin)
	if o.TimeoutSeconds > 0 {
		sr.Timeout = durationpb.New(time.Duration(o.TimeoutSeconds * float64(time.Second)))
	}
	procs := agentdv1.NewProcessServiceClient(s.conn)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := procs.Start(sctx, sr)
	if err != nil {
		return nil, ProcessResult{}, err
	}
	return s.follow(ctx, req, procs, wait, func() (*agentdv1.ProcessEvent, error) {
		m, err := st.Recv()
		return m.GetEvent(), err
	}, cancel, true)
}

// AttachInput is attach's arguments.
type AttachInput struct {
	ID          string  `json:"id" jsonschema:"the process id exec or sh returned, e.g. p-1a2b3c4d5e"`
	FromOffset  int64   `json:"from_offset,omitempty" jsonschema:"replay output from this byte offset (next_offset of the last result to see only what is new); default 0, the start"`
	WaitSeconds float64 `json:"wait_seconds,omitempty" jsonschema:"how long to follow (default 50, at most 600) before returning with running: true"`
}

func (s *Server) attach(ctx context.Context, req *mcp.CallToolRequest, in AttachInput) (*mcp.CallToolResult, ProcessResult, error) {
	if in.ID == "" {
		return nil, ProcessResult{}, errors.New("id is empty: give the id exec or sh returned")
	}
	if in.FromOffset < 0 {
		return nil, ProcessResult{}, errors.New("from_offset must not be negative")
	}
	wait, err := waitOf(in.WaitSeconds)
	if err != nil {
		return nil, ProcessResult{}, err
	}
	procs := agentdv1.NewProcessServiceClient(s.conn)
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := procs.Attach(actx, &agentdv1.AttachRequest{Id: in.ID, FromOffset: in.FromOffset})
	if err != nil {
		return nil, ProcessResult{}, err
	}
	// attach only watches: a cancelled call leaves the command be.
	return s.follow(ctx, req, procs, wait, func() (*agentdv1.ProcessEvent, error) {
		m, err := st.Recv()
		return m.GetEvent(), err
	}, cancel, false)
}

// follow collects a process's events from recv until it exits or wait
// passes; closeStream ends the stream recv reads (the process goes on).
// With own (exec, sh), the call started the process: when the client
// cancels the call, the process is killed.
func (s *Server) follow(ctx context.Context, req *mcp.CallToolRequest, procs agentdv1.ProcessServiceClient, wait time.Duration,
	recv func() (*agentdv1.ProcessEvent, error), closeStream func(), own bool) (*mcp.CallToolResult, ProcessResult, error) {
	first, err := recv()
	if err != nil {
		return nil, ProcessResult{}, err
	}
	started := first.GetStarted()
	if started == nil {
		return nil, ProcessResult{}, errors.New("the daemon did not report the process's start")
	}
	res := ProcessResult{ID: started.GetId(), PID: started.GetPid()}
	out := newClip(headBytes, tailBytes)
	prog := newProgress(ctx, req)

	events := make(chan eventOrErr)
	pctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { // owned: stop and <-done below
		defer close(done)
		for {
			ev, err := recv()
			select {
			case events <- eventOrErr{ev, err}:
			case <-pctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() { stop(); closeStream(); <-done }()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			if own {
				// The client cancelled the call: the command it started
				// goes too, its whole process group at once.
				kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				_, _ = procs.Signal(kctx, &agentdv1.SignalRequest{Id: res.ID, Signal: "KILL"})
				cancel()
			}
			return nil, res, ctx.Err()
		case <-timer.C:
			prog.flush()
			res.Running = true
			res.OutputBytes, res.CutBytes = out.total, out.cut()
			res.NextOffset = out.stdoutNext
			return text(withLine(out.String(), resultLine(res))), res, nil
		case e := <-events:
			if e.err != nil {
				if e.err == io.EOF {
					return nil, res, fmt.Errorf("the output of %s ended before it exited; attach to it to follow it", res.ID)
				}
				return nil, res, e.err
			}
			switch {
			case e.ev.GetOutput() != nil:
				o := e.ev.GetOutput()
				out.write(o.GetData())
				if o.GetStream() != agentdv1.OutputStream_OUTPUT_STREAM_STDERR {
					out.stdoutNext = o.GetOffset() + int64(len(o.GetData()))
				}
				prog.send(o.GetData(), out.total)
			case e.ev.GetGap() != nil:
				g := e.ev.GetGap()
				out.write([]byte(fmt.Sprintf("\n[… %d bytes of output not retained by the daemon …]\n", g.GetBytes())))
			case e.ev.GetExited() != nil:
				prog.flush()
				x := e.ev.GetExited()
				code := exitCode(x)
				res.ExitCode, res.Signal, res.TimedOut, res.Reason = &code, x.GetSignal(), x.GetTimedOut(), x.GetReason()
				res.OutputBytes, res.CutBytes = out.total, out.cut()
				return text(withLine(out.String(), resultLine(res))), res, nil
			}
		}
	}
}

type eventOrErr struct {
	ev  *agentdv1.ProcessEvent
	err error
}

// exitCode is the code a shell would report: 124 for a timeout, 128+N
// for signal N (see wire.ExitCode).
func exitCode(x *agentdv1.Exited) int {
	return wire.ExitCode(int(x.GetExitCode()), int(x.GetSignalNumber()), x.GetTimedOut())
}

// withLine puts line on a line of its own after output.
func withLine(output, line string) string {
	if output != "" && !strings.HasSuffix(output, "\n") {
		output += "\n"
	}
	return output + line
}

// resultLine ends a process's text result: how it ended and its id.
func resultLine(r ProcessResult) string {
	var b strings.Builder
	b.WriteString("[")
	switch {
	case r.Running:
		fmt.Fprintf(&b, "still running: id %s, pid %d; attach with id %q (from_offset %d for what is new) to follow it, kill to stop it", r.ID, r.PID, r.ID, r.NextOffset)
	case r.TimedOut:
		fmt.Fprintf(&b, "timed out, killed: exit code %d; id %s, pid %d", *r.ExitCode, r.ID, r.PID)
	case r.Signal != "":
		fmt.Fprintf(&b, "killed by signal %s: exit code %d; id %s, pid %d", r.Signal, *r.ExitCode, r.ID, r.PID)
	default:
		fmt.Fprintf(&b, "exit code %d; id %s, pid %d", *r.ExitCode, r.ID, r.PID)
	}
	if r.Reason != "" {
		fmt.Fprintf(&b, "; ended by the system: %s", r.Reason)
	}
	if r.CutBytes > 0 {
		fmt.Fprintf(&b, "; %d of %d output bytes cut from the middle", r.CutBytes, r.OutputBytes)
	}
	b.WriteString("]")
	return b.String()
}

// KillInput is kill's arguments.
type KillInput struct {
	ID     string `json:"id" jsonschema:"the process id exec or sh returned"`
	Signal string `json:"signal,omitempty" jsonschema:"signal name or number: TERM (default; KILL follows after 5 s), KILL, INT, HUP, USR1, …"`
}

// KillResult is kill's structured result.
type KillResult struct {
	ID     string `json:"id"`
	Signal string `json:"signal"`
}

func (s *Server) kill(ctx context.Context, _ *mcp.CallToolRequest, in KillInput) (*mcp.CallToolResult, KillResult, error) {
	if in.ID == "" {
		return nil, KillResult{}, errors.New("id is empty: give the id exec or sh returned")
	}
	sig := in.Signal
	if sig == "" {
		sig = "TERM"
	}
	if _, err := agentdv1.NewProcessServiceClient(s.conn).Signal(ctx, &agentdv1.SignalRequest{Id: in.ID, Signal: sig}); err != nil {
		return nil, KillResult{}, err
	}
	return text(fmt.Sprintf("sent %s to %s's process group", sig, in.ID)), KillResult{in.ID, sig}, nil
}

// clip keeps the first head and the last tail bytes of what is written.
type clip struct {
	head, tail []byte
	headMax    int
	tailMax    int
	total      int64
	stdoutNext int64
}

func newClip(head, tail int) *clip { return &clip{headMax: head, tailMax: tail} }

func (c *clip) write(p []byte) {
	c.total += int64(len(p))
	if n := min(len(p), c.headMax-len(c.head)); n > 0 {
		c.head = append(c.head, p[:n]...)
		p = p[n:]
	}
	if len(p) == 0 {
		return
	}
	c.tail = append(c.tail, p...)
	if over := len(c.tail) - c.tailMax; over > 0 {
		c.tail = append(c.tail[:0], c.tail[over:]...)
	}
}

// cut is how many bytes lie between the head and the tail.
func (c *clip) cut() int64 { return c.total - int64(len(c.head)) - int64(len(c.tail)) }

// String is the head, a marker where bytes were cut, and the tail, as
// valid UTF-8.
func (c *clip) String() string {
	if n := c.cut(); n > 0 {
		return strings.ToValidUTF8(string(c.head), "\uFFFD") + fmt.Sprintf("\n[… %d bytes cut …]\n", n) + strings.ToValidUTF8(string(c.tail), "\uFFFD")
	}
	return strings.ToValidUTF8(string(c.head)+string(c.tail), "\uFFFD")
}

// progress streams output to a client that sent a progress token, as
// notifications/progress whose message is the output since the last one:
// at most one per progressEvery (a flood of output is not a flood of
// notifications), the newest progressBytes of it.
type progress struct {
	ctx     context.Context
	req     *mcp.CallToolRequest
	token   any
	pending []byte
	total   int64
	last    time.Time
}

// progressEvery spaces progress notifications.
const progressEvery = 100 * time.Millisecond

func newProgress(ctx context.Context, req *mcp.CallToolRequest) *progress {
	p := &progress{ctx: ctx, req: req}
	if req != nil && req.Params != nil && req.Session != nil {
		p.token = req.Params.GetProgressToken()
	}
	return p
}

// send queues data (total bytes so far) and notifies when it is time.
func (p *progress) send(data []byte, total int64) {
	if p.token == nil || len(data) == 0 {
		return
	}
	p.pending = append(p.pending, data...)
	if over := len(p.pending) - progressBytes; over > 0 {
		p.pending = append(p.pending[:0], p.pending[over:]...)
	}
	p.total = total
	if time.Since(p.last) >= progressEvery {
		p.flush()
	}
}

// flush notifies what is queued.
func (p *progress) flush() {
	if p.token == nil || len(p.pending) == 0 {
		return
	}
	_ = p.req.Session.NotifyProgress(p.ctx, &mcp.ProgressNotificationParams{
		ProgressToken: p.token, Progress: float64(p.total), Message: strings.ToValidUTF8(string(p.pending), "\uFFFD"),
	})
	p.pending, p.last = p.pending[:0], time.Now()
}
