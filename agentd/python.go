package agentd

import (
	"context"
	"fmt"
	"os"
	"strings"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/devdepot-ai/agentd/internal/activity"
	"github.com/devdepot-ai/agentd/internal/wire"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
	"github.com/devdepot-ai/agentd/runner/pyrun"
)

// pythonService serves agentdv1.PythonService: it converts between proto
// messages and runner/pyrun, which does the work.
type pythonService struct {
	agentdv1.UnimplementedPythonServiceServer
	s *Server
	m *pyrun.Manager
}

var _ agentdv1.PythonServiceServer = (*pythonService)(nil)

func newPythonService(_ context.Context, s *Server) (*pythonService, error) {
	env := s.opts.Env
	if env == nil {
		env = os.Environ()
	}
	m := pyrun.New(pyrun.Options{
		Python:    s.opts.Python, // a bare name is looked up on the PATH of env at each start
		Env:       env,
		Workspace: s.opts.Workspace,
		Logger:    s.log.Named("python"),

		ChildOOMScoreAdj: childOOMScoreAdj(s.opts.Mode),
	})
	return &pythonService{s: s, m: m}, nil
}

// Close ends every session's interpreter and waits for the runs in progress.
func (p *pythonService) Close(ctx context.Context) error { return p.m.Shutdown(ctx) }

// Packages lists the Python distributions installed for the interpreter.
func (p *pythonService) Packages(ctx context.Context) ([]pyrun.Package, error) {
	return p.m.Packages(ctx)
}

// Run runs code and streams its events, done last.
func (p *pythonService) Run(req *agentdv1.RunRequest, stream agentdv1.PythonService_RunServer) error {
	spec := pyrun.RunSpec{
		Code:    req.GetCode(),
		Session: req.GetSession(),
		Cwd:     req.GetCwd(),
		Env:     req.GetEnv(),
	}
	if t := req.GetTimeout(); t != nil {
		if err := t.CheckValid(); err != nil {
			return invalidf("timeout: %v", err)
		}
		if spec.Timeout = t.AsDuration(); spec.Timeout < 0 {
			return invalidf("timeout %s is negative", spec.Timeout)
		}
	}
	rec := activity.Record{Kind: wire.KindPythonRun, Summary: pythonSummary(spec), Cwd: spec.Cwd, ObjectID: spec.Session}
	var output []byte
	err := p.m.Run(stream.Context(), spec, func(ev pyrun.Event) error {
		switch e := ev.(type) {
		case pyrun.Output:
			if len(output) < activity.MaxOutput {
				output = append(output, e.Data[:min(len(e.Data), activity.MaxOutput-len(output))]...)
			}
		case pyrun.Result:
			output = append(output, e.Repr[:min(len(e.Repr), 1024)]...)
		case pyrun.Error:
			rec.Error = e.Name + ": " + e.Value
		case pyrun.Done:
			rec.Duration = e.Duration
			if e.TimedOut {
				rec.Error = "timed out"
			}
		}
		return stream.Send(runResponse(ev))
	})
	rec.Output = output
	switch {
	case err != nil:
		rec.Outcome, rec.Error = activity.Failed, err.Error()
	case rec.Error != "":
		rec.Outcome = activity.Failed
	default:
		rec.Outcome = activity.OK
	}
	p.s.record(stream.Context(), rec)
	return err
}

// pythonSummary is the one line a person reads: the code's first line.
func pythonSummary(spec pyrun.RunSpec) string {
	first, _, more := strings.Cut(strings.TrimSpace(spec.Code), "\n")
	if len(first) > 80 {
		first, more = first[:80], true
	}
	if more {
		first += " …"
	}
	where := "Python"
	if spec.Session != "" {
		where = "Python (session " + spec.Session + ")"
	}
	return fmt.Sprintf("ran %s: %s", where, first)
}

// runResponse converts a run's event to its message.
func runResponse(ev pyrun.Event) *agentdv1.RunResponse {
	switch e := ev.(type) {
	case pyrun.Output:
		st := agentdv1.PythonStream_PYTHON_STREAM_STDOUT
		if e.Stream == pyrun.Stderr {
			st = agentdv1.PythonStream_PYTHON_STREAM_STDERR
		}
		return &agentdv1.RunResponse{Event: &agentdv1.RunResponse_Output{Output: &agentdv1.PythonOutput{Stream: st, Data: e.Data}}}
	case pyrun.Result:
		return &agentdv1.RunResponse{Event: &agentdv1.RunResponse_Result{Result: &agentdv1.PythonResult{Repr: e.Repr}}}
	case pyrun.Error:
		return &agentdv1.RunResponse{Event: &agentdv1.RunResponse_Error{Error: &agentdv1.PythonError{Name: e.Name, Value: e.Value, Traceback: e.Traceback}}}
	case pyrun.Done:
		return &agentdv1.RunResponse{Event: &agentdv1.RunResponse_Done{Done: &agentdv1.PythonDone{
			Duration:     durationpb.New(e.Duration),
			TimedOut:     e.TimedOut,
			Failed:       e.Failed,
			SessionAlive: e.SessionAlive,
		}}}
	}
	return &agentdv1.RunResponse{}
}

// ResetSession restarts a session's interpreter, clearing its globals.
func (p *pythonService) ResetSession(ctx context.Context, req *agentdv1.ResetSessionRequest) (*agentdv1.ResetSessionResponse, error) {
	if err := p.m.Reset(ctx, req.GetSession()); err != nil {
		return nil, err
	}
	return &agentdv1.ResetSessionResponse{}, nil
}

// CloseSession ends a session and its interpreter.
func (p *pythonService) CloseSession(_ context.Context, req *agentdv1.CloseSessionRequest) (*agentdv1.CloseSessionResponse, error) {
	if err := p.m.Close(req.GetSession()); err != nil {
		return nil, err
	}
	return &agentdv1.CloseSessionResponse{}, nil
}

// ListSessions lists the live sessions, sorted by name.
func (p *pythonService) ListSessions(context.Context, *agentdv1.ListSessionsRequest) (*agentdv1.ListSessionsResponse, error) {
	list := p.m.List()
	resp := &agentdv1.ListSessionsResponse{Sessions: make([]*agentdv1.PythonSession, 0, len(list))}
	for _, s := range list {
		resp.Sessions = append(resp.Sessions, &agentdv1.PythonSession{
			Name:     s.Name,
			Pid:      int32(s.Pid),
			Created:  timestamppb.New(s.Created),
			LastUsed: timestamppb.New(s.LastUsed),
			Runs:     s.Runs,
			Busy:     s.Busy,
		})
	}
	return resp, nil
}
