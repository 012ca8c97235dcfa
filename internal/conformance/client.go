package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// The calls the checks make, each collecting a stream into one answer.

func (s *suite) write(ctx context.Context, p string, data []byte) (*agentdv1.WriteResponse, error) {
	st, err := s.files.Write(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range []*agentdv1.WriteRequest{
		{Msg: &agentdv1.WriteRequest_Header{Header: &agentdv1.WriteHeader{Path: p, CreateParents: true}}},
		{Msg: &agentdv1.WriteRequest_Data{Data: data}},
	} {
		if err := st.Send(m); err != nil {
			_, err = st.CloseAndRecv() // the server's reason
			return nil, err
		}
	}
	return st.CloseAndRecv()
}

func (s *suite) read(ctx context.Context, p string) ([]byte, error) {
	st, err := s.files.Read(ctx, &agentdv1.ReadRequest{Path: p})
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	for {
		m, err := st.Recv()
		if err == io.EOF {
			return buf.Bytes(), nil
		}
		if err != nil {
			return nil, err
		}
		buf.Write(m.GetData())
	}
}

// fixtureText is the file the file checks work on.
const fixtureText = "alpha\nbeta marker-7f3a\ngamma\nbeta\n"

// fixture writes fixtureText to dir/sub/notes.txt in the scratch
// directory and returns its path.
func (s *suite) fixture(ctx context.Context, dir string) (string, error) {
	p := s.p(dir, "sub", "notes.txt")
	if _, err := s.write(ctx, p, []byte(fixtureText)); err != nil {
		return "", fail("the agent cannot create files, so this could not be checked", "see the write check", err)
	}
	return p, nil
}

// proc is a finished process as the checks see it.
type proc struct {
	stdout, stderr, pty string
	exited              *agentdv1.Exited
}

func (s *suite) runProc(ctx context.Context, req *agentdv1.StartRequest) (proc, error) {
	st, err := s.procs.Start(ctx, req)
	if err != nil {
		return proc{}, err
	}
	var out, errb, pty strings.Builder
	for {
		m, err := st.Recv()
		if err == io.EOF {
			return proc{}, errors.New("the event stream ended without an exit event")
		}
		if err != nil {
			return proc{}, err
		}
		ev := m.GetEvent()
		if o := ev.GetOutput(); o != nil {
			switch o.GetStream() {
			case agentdv1.OutputStream_OUTPUT_STREAM_STDERR:
				errb.Write(o.GetData())
			case agentdv1.OutputStream_OUTPUT_STREAM_PTY:
				pty.Write(o.GetData())
			default:
				out.Write(o.GetData())
			}
		}
		if x := ev.GetExited(); x != nil {
			return proc{stdout: out.String(), stderr: errb.String(), pty: pty.String(), exited: x}, nil
		}
	}
}

// shell runs command the way an agent's command strings run: through the
// target's shell, in the scratch directory.
func (s *suite) shell(ctx context.Context, command string) (proc, error) {
	return s.runProc(ctx, &agentdv1.StartRequest{Command: command, Cwd: s.dir})
}

// sh runs a POSIX script with sh (whatever the target's shell), in the
// scratch directory: the checks' own probes.
func (s *suite) sh(ctx context.Context, script string) (proc, error) {
	return s.runProc(ctx, &agentdv1.StartRequest{Argv: []string{"sh", "-c", script}, Cwd: s.dir})
}

// py runs code and returns its result's repr and its output; a Python
// exception is an error.
func (s *suite) py(ctx context.Context, code, session string) (result, out string, err error) {
	st, err := s.python.Run(ctx, &agentdv1.RunRequest{Code: code, Session: session, Timeout: durationpb.New(30 * time.Second)})
	if err != nil {
		return "", "", err
	}
	var sb strings.Builder
	for {
		m, err := st.Recv()
		if err == io.EOF {
			return result, sb.String(), nil
		}
		if err != nil {
			return "", "", err
		}
		switch {
		case m.GetOutput() != nil:
			sb.Write(m.GetOutput().GetData())
		case m.GetResult() != nil:
			result = m.GetResult().GetRepr()
		case m.GetError() != nil:
			e := m.GetError()
			return "", "", fmt.Errorf("%s: %s", e.GetName(), e.GetValue())
		}
	}
}
