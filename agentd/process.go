package agentd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/devdepot-ai/agentd/internal/activity"
	"github.com/devdepot-ai/agentd/internal/wire"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
	"github.com/devdepot-ai/agentd/runner"
)

// processService serves agentdv1.ProcessService on a runner.Manager.
type processService struct {
	agentdv1.UnimplementedProcessServiceServer
	s   *Server
	log *zap.Logger
	m   *runner.Manager

	// watchers records the exit of every started process in the activity
	// log; Close waits for them.
	watchers sync.WaitGroup
	// hub holds the running processes started through the tunnel: what a
	// revoke stops (revoke.go).
	hub hubProcesses
}

var _ agentdv1.ProcessServiceServer = (*processService)(nil)

func newProcessService(ctx context.Context, s *Server) (*processService, error) {
	log := s.log.Named("process")
	o := runner.Options{
		Logger: s.log,
		Env:    s.opts.Env,
		Dir:    s.opts.Workspace,
		Shell:  s.opts.Shell,

		ChildOOMScoreAdj: childOOMScoreAdj(s.opts.Mode),
		// A sandbox's root is its image, read-only: its PATH lookups are
		// remembered (the runner checks that the root is read-only).
		ReadOnlyRoot: s.opts.Mode == ModeSandbox,
	}
	if s.secrets != nil {
		o.ExtraEnv = s.secrets.env
	}
	return &processService{s: s, log: log, m: runner.New(o)}, nil
}

// Close stops every running process: SIGTERM, grace, SIGKILL.
func (ps *processService) Close(ctx context.Context) error {
	err := ps.m.Close(ctx)
	ps.watchers.Wait()
	return err
}

// Start starts the command and streams its events. Cancelling the call
// stops the stream, not the process.
func (ps *processService) Start(req *agentdv1.StartRequest, stream agentdv1.ProcessService_StartServer) error {
	ctx := stream.Context()
	spec, err := specFromProto(req)
	if err != nil {
		return err
	}
	p, sub, err := ps.m.StartAttached(ctx, spec)
	if err != nil {
		ps.s.record(ctx, activity.Record{
			Kind: wire.KindProcessStart, Summary: "ran " + describe(spec), Command: commandLine(spec.Argv, spec.Command),
			Cwd: spec.Dir, Outcome: activity.Failed, Error: err.Error(),
		})
		return err
	}
	defer sub.Close()
	ps.recordStart(ctx, p, spec)
	return ps.follow(ctx, sub, func(ev *agentdv1.ProcessEvent) error {
		return stream.Send(&agentdv1.StartResponse{Event: ev})
	})
}

// Attach replays a process's retained output and follows it live.
func (ps *processService) Attach(req *agentdv1.AttachRequest, stream agentdv1.ProcessService_AttachServer) error {
	ctx := stream.Context()
	from := runner.Offsets{Stdout: req.GetFromOffset(), Stderr: req.GetFromOffset()}
	if req.StderrFromOffset != nil {
		from.Stderr = req.GetStderrFromOffset()
	}
	sub, err := ps.m.Attach(ctx, req.GetId(), from)
	if err != nil {
		return err
	}
	defer sub.Close()
	return ps.follow(ctx, sub, func(ev *agentdv1.ProcessEvent) error {
		return stream.Send(&agentdv1.AttachResponse{Event: ev})
	})
}

// follow sends the subscription's events until the process has exited and
// everything was sent, or the caller went away.
func (ps *processService) follow(ctx context.Context, sub *runner.Subscription, send func(*agentdv1.ProcessEvent) error) error {
	// send marshals each event before it returns: the output buffer can
	// be reused for the next one.
	sub.ReuseBuffer()
	for {
		ev, err := sub.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		if err := send(eventToProto(ev)); err != nil {
			return err
		}
	}
}

// List lists the processes, oldest first.
func (ps *processService) List(ctx context.Context, req *agentdv1.ProcessServiceListRequest) (*agentdv1.ProcessServiceListResponse, error) {
	infos := ps.m.List()
	resp := &agentdv1.ProcessServiceListResponse{Processes: make([]*agentdv1.ProcessInfo, len(infos))}
	for i, info := range infos {
		resp.Processes[i] = infoToProto(info)
	}
	return resp, nil
}

// Wait waits until the process has exited or the call's deadline passes.
func (ps *processService) Wait(ctx context.Context, req *agentdv1.WaitRequest) (*agentdv1.WaitResponse, error) {
	info, err := ps.m.Wait(ctx, req.GetId())
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return &agentdv1.WaitResponse{Process: infoToProto(info)}, nil
}

// Input writes the stream's data to the process's stdin, in order, and
// closes it on eof.
func (ps *processService) Input(stream agentdv1.ProcessService_InputServer) error {
	ctx := stream.Context()
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return invalidf("empty input stream: the first message must name the process")
	}
	if err != nil {
		return err
	}
	if first.GetId() == "" {
		return invalidf("the first input message must name the process (id)")
	}
	p, err := ps.m.Lookup(first.GetId())
	if err != nil {
		return err
	}
	var written int64
	defer func() {
		if written > 0 {
			ps.s.record(ctx, activity.Record{
				Kind: wire.KindProcessInput, Summary: fmt.Sprintf("wrote %d bytes to the stdin of %s", written, p.ID()),
				ObjectID: p.ID(), Bytes: written, Outcome: activity.OK,
			})
		}
	}()
	for req := first; ; {
		if len(req.GetData()) > 0 {
			if err := p.Input(ctx, req.GetData()); err != nil {
				return err
			}
			written += int64(len(req.GetData()))
		}
		if req.GetEof() {
			if err := p.CloseInput(ctx); err != nil {
				return err
			}
		}
		req, err = stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&agentdv1.InputResponse{BytesWritten: written})
		}
		if err != nil {
			return err
		}
	}
}

// Signal signals the process's group.
func (ps *processService) Signal(ctx context.Context, req *agentdv1.SignalRequest) (*agentdv1.SignalResponse, error) {
	name := req.GetSignal()
	if name == "" {
		name = "TERM"
	}
	sig, err := runner.ParseSignal(name)
	if err != nil {
		return nil, err
	}
	grace, err := durationFromProto("grace", req.GetGrace())
	if err != nil {
		return nil, err
	}
	err = ps.m.Signal(req.GetId(), sig, grace)
	r := activity.Record{
		Kind: wire.KindProcessSignal, Summary: fmt.Sprintf("sent %s to %s", runner.SignalName(sig), req.GetId()),
		ObjectID: req.GetId(), Outcome: activity.OK,
	}
	if err != nil {
		r.Outcome, r.Error = activity.Failed, err.Error()
	}
	ps.s.record(ctx, r)
	if err != nil {
		return nil, err
	}
	return &agentdv1.SignalResponse{}, nil
}

// Resize changes the window size of the process's pty.
func (ps *processService) Resize(ctx context.Context, req *agentdv1.ResizeRequest) (*agentdv1.ResizeResponse, error) {
	if req.GetSize() == nil || req.GetSize().GetRows() == 0 || req.GetSize().GetCols() == 0 {
		return nil, invalidf("size: rows and cols are required")
	}
	size, err := ptySizeFromProto(req.GetSize())
	if err != nil {
		return nil, err
	}
	if err := ps.m.Resize(req.GetId(), *size); err != nil {
		return nil, err
	}
	return &agentdv1.ResizeResponse{}, nil
}

// recordStart writes the start of p to the activity log, and its exit once
// it has finished, whether or not anyone is still attached.
func (ps *processService) recordStart(ctx context.Context, p *runner.Process, spec runner.Spec) {
	info := p.Info()
	start := ps.s.record(ctx, activity.Record{
		Kind: wire.KindProcessStart, Summary: "ran " + describe(spec) + " in " + info.Dir,
		Command: commandLine(spec.Argv, spec.Command), Cwd: info.Dir, ObjectID: p.ID(), Outcome: activity.Started,
	})
	if viaHub(ctx) {
		ps.hub.add(p)
	}
	ps.watchers.Add(1)
	go func() {
		defer ps.watchers.Done()
		<-p.Done() // Close waits for every process to finish
		ps.hub.remove(p.ID())
		exit, _ := p.Wait(context.Background())
		r := activity.Record{
			Actor: start.Actor, ClaimedActor: start.ClaimedActor, Client: start.Client, Conversation: start.Conversation,
			Kind: wire.KindProcessExit, Summary: start.Summary, Command: start.Command, Cwd: start.Cwd,
			ObjectID: p.ID(), Outcome: activity.OK, ExitCode: exit.Code, Duration: exit.Duration,
			Output: excerpt(p),
		}
		switch {
		case exit.TimedOut:
			r.Outcome, r.Error = activity.Failed, "timed out"
		case exit.Signal != "":
			r.Outcome, r.Error = activity.Failed, "killed by SIG"+exit.Signal
			if exit.Reason != "" {
				r.Error += ": " + exit.Reason
			}
		case exit.Reason != "":
			r.Error = exit.Reason // pids refused: the exit is the command's own
		}
		for _, st := range exit.Streams {
			r.Bytes += st.Total
		}
		ps.s.activity.Add(r)
	}()
}

// excerpt is the head and tail of a process's output for the audit log.
func excerpt(p *runner.Process) []byte {
	const n = activity.MaxOutput / 2
	var out []byte
	for _, s := range []runner.Stream{runner.StreamStdout, runner.StreamPty, runner.StreamStderr} {
		head, tail, cut := p.Excerpt(s, n)
		if len(head)+len(tail) == 0 {
			continue
		}
		if s == runner.StreamStderr && len(out) > 0 {
			out = append(out, "\n[stderr]\n"...)
		}
		out = append(out, head...)
		if cut {
			out = append(out, "\n…[output cut]…\n"...)
		}
		out = append(out, tail...)
	}
	return out
}

func describe(spec runner.Spec) string {
	return "`" + truncate(commandLine(spec.Argv, spec.Command), 200) + "`"
}

// commandLine renders argv or a shell command as one line.
func commandLine(argv []string, command string) string {
	if command != "" {
		return command
	}
	quoted := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`;&|<>()*?[]#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		quoted[i] = a
	}
	return strings.Join(quoted, " ")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// specFromProto converts a StartRequest, checking what the proto cannot
// express; the runner checks the rest.
func specFromProto(req *agentdv1.StartRequest) (runner.Spec, error) {
	spec := runner.Spec{
		Argv:       req.GetArgv(),
		Command:    req.GetCommand(),
		Dir:        req.GetCwd(),
		Env:        req.GetEnv(),
		Stdin:      req.GetStdin(),
		OpenStdin:  req.GetOpenStdin(),
		RetainHead: req.GetRetainHeadBytes(),
		RetainTail: req.GetRetainTailBytes(),
		Tag:        req.GetTag(),
	}
	var err error
	if spec.Timeout, err = durationFromProto("timeout", req.GetTimeout()); err != nil {
		return spec, err
	}
	if spec.Grace, err = durationFromProto("kill_grace", req.GetKillGrace()); err != nil {
		return spec, err
	}
	if req.GetPty() != nil {
		if spec.Pty, err = ptySizeFromProto(req.GetPty()); err != nil {
			return spec, err
		}
	}
	return spec, nil
}

func durationFromProto(field string, d *durationpb.Duration) (time.Duration, error) {
	if d == nil {
		return 0, nil
	}
	if err := d.CheckValid(); err != nil {
		return 0, invalidf("%s: %v", field, err)
	}
	if d.AsDuration() < 0 {
		return 0, invalidf("%s %v is negative", field, d.AsDuration())
	}
	return d.AsDuration(), nil
}

func ptySizeFromProto(s *agentdv1.PtySize) (*runner.PtySize, error) {
	if s.GetRows() > math.MaxUint16 || s.GetCols() > math.MaxUint16 {
		return nil, invalidf("pty size %dx%d is too large", s.GetRows(), s.GetCols())
	}
	return &runner.PtySize{Rows: uint16(s.GetRows()), Cols: uint16(s.GetCols())}, nil
}

func streamToProto(s runner.Stream) agentdv1.OutputStream {
	switch s {
	case runner.StreamStdout:
		return agentdv1.OutputStream_OUTPUT_STREAM_STDOUT
	case runner.StreamStderr:
		return agentdv1.OutputStream_OUTPUT_STREAM_STDERR
	case runner.StreamPty:
		return agentdv1.OutputStream_OUTPUT_STREAM_PTY
	}
	return agentdv1.OutputStream_OUTPUT_STREAM_UNSPECIFIED
}

func eventToProto(ev runner.Event) *agentdv1.ProcessEvent {
	switch e := ev.(type) {
	case runner.Started:
		return &agentdv1.ProcessEvent{Event: &agentdv1.ProcessEvent_Started{Started: &agentdv1.Started{
			Id: e.ID, Pid: int32(e.PID), StartTime: timestamppb.New(e.StartTime),
		}}}
	case runner.Output:
		return &agentdv1.ProcessEvent{Event: &agentdv1.ProcessEvent_Output{Output: &agentdv1.Output{
			Stream: streamToProto(e.Stream), Offset: e.Offset, Data: e.Data,
		}}}
	case runner.Gap:
		return &agentdv1.ProcessEvent{Event: &agentdv1.ProcessEvent_Gap{Gap: &agentdv1.Gap{
			Stream: streamToProto(e.Stream), Offset: e.Offset, Bytes: e.Bytes,
		}}}
	case runner.Exited:
		return &agentdv1.ProcessEvent{Event: &agentdv1.ProcessEvent_Exited{Exited: exitToProto(e.ExitInfo)}}
	}
	panic(fmt.Sprintf("unknown runner event %T", ev))
}

func exitToProto(e runner.ExitInfo) *agentdv1.Exited {
	x := &agentdv1.Exited{
		ExitCode:     int32(e.Code),
		Signal:       e.Signal,
		SignalNumber: int32(e.SignalNumber),
		TimedOut:     e.TimedOut,
		Reason:       e.Reason,
		Duration:     durationpb.New(e.Duration),
		EndTime:      timestamppb.New(e.EndTime),
	}
	for _, st := range e.Streams {
		x.Streams = append(x.Streams, &agentdv1.StreamStats{
			Stream: streamToProto(st.Stream), TotalBytes: st.Total, OmittedBytes: st.Omitted,
		})
	}
	return x
}

func infoToProto(info runner.Info) *agentdv1.ProcessInfo {
	p := &agentdv1.ProcessInfo{
		Id:        info.ID,
		Pid:       int32(info.PID),
		State:     agentdv1.ProcessState_PROCESS_STATE_RUNNING,
		Argv:      info.Argv,
		Command:   info.Command,
		Cwd:       info.Dir,
		Tag:       info.Tag,
		StartTime: timestamppb.New(info.StartTime),
		Pty:       info.Pty,
		StdinOpen: info.StdinOpen,
	}
	if info.Exit != nil {
		p.State = agentdv1.ProcessState_PROCESS_STATE_EXITED
		p.Exited = exitToProto(*info.Exit)
	}
	return p
}
