package ctl_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/devdepot-ai/agentd/internal/ctl"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// gapDaemon is a hub whose AgentService makes sandbox sb-gap and whose
// routed agentd answers every Start with output that has a hole in the
// middle (what a follower that fell behind the daemon's retention gets),
// then an exit. A real daemon holds a live follower's output back rather
// than lose it, so only a fake can make this happen on cue.
type gapDaemon struct {
	hubv1.UnimplementedAgentServiceServer
	agentdv1.UnimplementedProcessServiceServer

	mu   sync.Mutex
	argv [][]string // of each Start
}

func (g *gapDaemon) RunAgent(context.Context, *hubv1.RunAgentRequest) (*hubv1.RunAgentResponse, error) {
	return &hubv1.RunAgentResponse{SandboxId: "sb-gap", Image: "sha256:1a2b", Executable: "fixture",
		Expires: timestamppb.Now()}, nil
}

func (g *gapDaemon) Start(req *agentdv1.StartRequest, st grpc.ServerStreamingServer[agentdv1.StartResponse]) error {
	g.mu.Lock()
	g.argv = append(g.argv, req.GetArgv())
	g.mu.Unlock()
	stdout, stderr := agentdv1.OutputStream_OUTPUT_STREAM_STDOUT, agentdv1.OutputStream_OUTPUT_STREAM_STDERR
	for _, ev := range []*agentdv1.ProcessEvent{
		{Event: &agentdv1.ProcessEvent_Started{Started: &agentdv1.Started{Id: "p-1"}}},
		{Event: &agentdv1.ProcessEvent_Output{Output: &agentdv1.Output{Stream: stdout, Offset: 0, Data: []byte("head\n")}}},
		{Event: &agentdv1.ProcessEvent_Gap{Gap: &agentdv1.Gap{Stream: stdout, Offset: 5, Bytes: 1000}}},
		{Event: &agentdv1.ProcessEvent_Output{Output: &agentdv1.Output{Stream: stdout, Offset: 1005, Data: []byte("tail\n")}}},
		{Event: &agentdv1.ProcessEvent_Output{Output: &agentdv1.Output{Stream: stderr, Offset: 0, Data: []byte("warning\n")}}},
		{Event: &agentdv1.ProcessEvent_Exited{Exited: &agentdv1.Exited{ExitCode: 7}}},
	} {
		if err := st.Send(&agentdv1.StartResponse{Event: ev}); err != nil {
			return err
		}
	}
	return nil
}

// agent run PROFILE -- ARGS reports a hole in the output as exec does: the
// same stdout, the same "[agentctl: N bytes of stdout not retained]" line
// on stderr, the same exit code.
func TestAgentRunReportsTruncationAsExec(t *testing.T) {
	t.Parallel()
	g := &gapDaemon{}
	srv := grpc.NewServer()
	hubv1.RegisterAgentServiceServer(srv, g)
	agentdv1.RegisterProcessServiceServer(srv, g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-done; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("Serve: %v", err)
		}
	})
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("tok-test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) result {
		var out, errb bytes.Buffer
		base := []string{"--addr=", "--conversation=", "--hub", "http://" + lis.Addr().String(), "--token-file", tokenFile}
		code := ctl.Main(t.Context(), append(base, args...), ctl.IO{In: strings.NewReader(""), Out: &out, Err: &errb})
		return result{code, out.String(), errb.String()}
	}

	agent := run("agent", "run", "fixture", "--", "--flag", "a b")
	// agent run's own line before the run (the sandbox and its image).
	first, rest, _ := strings.Cut(agent.stderr, "\n")
	if !strings.HasPrefix(first, "agentctl: sandbox sb-gap from image sha256:1a2b (until ") {
		t.Errorf("agent run's first stderr line %q; want the sandbox and its image", first)
	}
	agent.stderr = rest
	exec := run("--machine", "sb-gap", "exec", "--", "fixture", "--flag", "a b")
	want := result{7, "head\ntail\n", "\n[agentctl: 1000 bytes of stdout not retained]\nwarning\n"}
	for name, got := range map[string]result{"agent run": agent, "exec": exec} {
		if diff := cmp.Diff(got, want, cmp.AllowUnexported(result{})); diff != "" {
			t.Errorf("%s (-got +want):\n%s", name, diff)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if diff := cmp.Diff(g.argv, [][]string{{"fixture", "--flag", "a b"}, {"fixture", "--flag", "a b"}}); diff != "" {
		t.Errorf("argv started (-got +want):\n%s", diff)
	}
}
