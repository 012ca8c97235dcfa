package agentd

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/devdepot-ai/agentd/internal/activity"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// events is what a Start or Attach stream delivered.
type events struct {
	started *agentdv1.Started
	out     map[agentdv1.OutputStream][]byte
	gaps    []*agentdv1.Gap
	exited  *agentdv1.Exited
	order   []string // event kinds in order, output runs collapsed
}

type eventStream interface {
	Recv() (*agentdv1.ProcessEvent, error)
}

type startStream struct {
	agentdv1.ProcessService_StartClient
}

func (s startStream) Recv() (*agentdv1.ProcessEvent, error) {
	r, err := s.ProcessService_StartClient.Recv()
	return r.GetEvent(), err
}

type attachStream struct {
	agentdv1.ProcessService_AttachClient
}

func (s attachStream) Recv() (*agentdv1.ProcessEvent, error) {
	r, err := s.ProcessService_AttachClient.Recv()
	return r.GetEvent(), err
}

// readEvents reads a stream to its end, or until stop says so.
func readEvents(t *testing.T, st eventStream, stop func(*events) bool) *events {
	t.Helper()
	ev := &events{out: map[agentdv1.OutputStream][]byte{}}
	next := map[agentdv1.OutputStream]int64{}
	for {
		e, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return ev
		}
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		kind := ""
		switch x := e.GetEvent().(type) {
		case *agentdv1.ProcessEvent_Started:
			kind, ev.started = "started", x.Started
		case *agentdv1.ProcessEvent_Output:
			o := x.Output
			if want, seen := next[o.Stream]; seen && o.Offset != want {
				t.Fatalf("%v output at %d, want %d", o.Stream, o.Offset, want)
			}
			if len(o.Data) > 32<<10 {
				t.Fatalf("output chunk of %d bytes", len(o.Data))
			}
			next[o.Stream] = o.Offset + int64(len(o.Data))
			kind = "output"
			ev.out[o.Stream] = append(ev.out[o.Stream], o.Data...)
		case *agentdv1.ProcessEvent_Gap:
			kind = "gap"
			ev.gaps = append(ev.gaps, x.Gap)
			next[x.Gap.Stream] = x.Gap.Offset + x.Gap.Bytes
		case *agentdv1.ProcessEvent_Exited:
			kind, ev.exited = "exited", x.Exited
		default:
			t.Fatalf("unknown event %v", e)
		}
		if n := len(ev.order); n == 0 || ev.order[n-1] != kind || kind != "output" {
			ev.order = append(ev.order, kind)
		}
		if stop != nil && stop(ev) {
			return ev
		}
	}
}

func startAndRead(t *testing.T, c agentdv1.ProcessServiceClient, req *agentdv1.StartRequest) *events {
	t.Helper()
	st, err := c.Start(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	return readEvents(t, startStream{st}, nil)
}

func wantCode(t *testing.T, err error, code codes.Code, msg string) {
	t.Helper()
	if status.Code(err) != code || !strings.Contains(status.Convert(err).Message(), msg) {
		t.Errorf("err = %v, want %v containing %q", err, code, msg)
	}
}

func TestProcessStart(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	c := agentdv1.NewProcessServiceClient(ts.Conn)
	ev := startAndRead(t, c, &agentdv1.StartRequest{
		Command: `printf 'out\000'; printf err >&2; pwd; echo "$FOO"; exit 7`,
		Env:     map[string]string{"FOO": "bar"},
		Tag:     "t1",
	})
	if ev.order[0] != "started" || ev.order[len(ev.order)-1] != "exited" {
		t.Errorf("event order %v", ev.order)
	}
	ws := ts.Options().Workspace
	if got, want := string(ev.out[agentdv1.OutputStream_OUTPUT_STREAM_STDOUT]), "out\x00"+ws+"\nbar\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	if got := string(ev.out[agentdv1.OutputStream_OUTPUT_STREAM_STDERR]); got != "err" {
		t.Errorf("stderr = %q", got)
	}
	want := &agentdv1.Exited{
		ExitCode: 7,
		Streams: []*agentdv1.StreamStats{
			{Stream: agentdv1.OutputStream_OUTPUT_STREAM_STDOUT, TotalBytes: int64(len(ws) + 9)},
			{Stream: agentdv1.OutputStream_OUTPUT_STREAM_STDERR, TotalBytes: 3},
		},
	}
	if diff := cmp.Diff(ev.exited, want, protocmp.Transform(), protocmp.IgnoreFields(&agentdv1.Exited{}, "duration", "end_time")); diff != "" {
		t.Errorf("exited (-got +want):\n%s", diff)
	}

	list, err := c.List(t.Context(), &agentdv1.ProcessServiceListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Processes) != 1 {
		t.Fatalf("List = %v", list)
	}
	p := list.Processes[0]
	if p.Id != ev.started.Id || p.Pid != ev.started.Pid || p.State != agentdv1.ProcessState_PROCESS_STATE_EXITED ||
		p.Tag != "t1" || p.Cwd != ws || p.Exited.GetExitCode() != 7 || !strings.HasPrefix(p.Command, "printf") || len(p.Argv) != 3 {
		t.Errorf("List entry = %v", p)
	}
}

func TestProcessStartErrors(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	c := agentdv1.NewProcessServiceClient(ts.Conn)
	for _, tc := range []struct {
		req  *agentdv1.StartRequest
		code codes.Code
		msg  string
	}{
		{&agentdv1.StartRequest{Argv: []string{"no-such-command-xyz"}}, codes.NotFound, "command not found: no-such-command-xyz"},
		{&agentdv1.StartRequest{Argv: []string{"true"}, Cwd: "/nonexistent"}, codes.NotFound, "cwd /nonexistent does not exist"},
		{&agentdv1.StartRequest{Argv: []string{"echo", "a\x00"}}, codes.InvalidArgument, "NUL"},
		{&agentdv1.StartRequest{}, codes.InvalidArgument, "nothing to run"},
		{&agentdv1.StartRequest{Argv: []string{"env"}, Env: map[string]string{"AGENTD_TOKEN": "x"}}, codes.InvalidArgument, "AGENTD_"},
		{&agentdv1.StartRequest{Argv: []string{"true"}, Timeout: durationpb.New(-time.Second)}, codes.InvalidArgument, "negative"},
		{&agentdv1.StartRequest{Argv: []string{"true"}, Pty: &agentdv1.PtySize{Rows: 1 << 20}}, codes.InvalidArgument, "too large"},
	} {
		st, err := c.Start(t.Context(), tc.req)
		if err == nil {
			_, err = st.Recv()
		}
		wantCode(t, err, tc.code, tc.msg)
	}
}

// TestProcessSurvivesCancelledStart: cancelling Start's stream leaves the
// process running; Attach replays it, Input feeds it.
func TestProcessSurvivesCancelledStart(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	c := agentdv1.NewProcessServiceClient(ts.Conn)
	ctx, cancel := context.WithCancel(t.Context())
	st, err := c.Start(ctx, &agentdv1.StartRequest{Command: "echo ready; cat; echo done >&2", OpenStdin: true})
	if err != nil {
		t.Fatal(err)
	}
	ev := readEvents(t, startStream{st}, func(e *events) bool {
		return bytes.Contains(e.out[agentdv1.OutputStream_OUTPUT_STREAM_STDOUT], []byte("ready\n"))
	})
	id := ev.started.Id
	cancel()
	if _, err := st.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("Recv after cancel: %v", err)
	}

	list, err := c.List(t.Context(), &agentdv1.ProcessServiceListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Processes) != 1 || list.Processes[0].State != agentdv1.ProcessState_PROCESS_STATE_RUNNING || !list.Processes[0].StdinOpen {
		t.Fatalf("after cancel: %v", list.Processes)
	}

	in, err := c.Input(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for i, msg := range []*agentdv1.InputRequest{{Id: id, Data: []byte("one ")}, {Data: []byte("two\n")}, {Data: []byte("three\n"), Eof: true}} {
		if err := in.Send(msg); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
	}
	resp, err := in.CloseAndRecv()
	if err != nil {
		t.Fatal(err)
	}
	if resp.BytesWritten != 14 {
		t.Errorf("bytes written = %d", resp.BytesWritten)
	}

	wait, err := c.Wait(t.Context(), &agentdv1.WaitRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	if wait.Process.State != agentdv1.ProcessState_PROCESS_STATE_EXITED || wait.Process.Exited.GetExitCode() != 0 {
		t.Errorf("Wait = %v", wait.Process)
	}

	at, err := c.Attach(t.Context(), &agentdv1.AttachRequest{Id: id, FromOffset: 6, StderrFromOffset: proto.Int64(0)})
	if err != nil {
		t.Fatal(err)
	}
	ev = readEvents(t, attachStream{at}, nil)
	if got := string(ev.out[agentdv1.OutputStream_OUTPUT_STREAM_STDOUT]); got != "one two\nthree\n" {
		t.Errorf("attached stdout from 6 = %q", got)
	}
	if got := string(ev.out[agentdv1.OutputStream_OUTPUT_STREAM_STDERR]); got != "done\n" {
		t.Errorf("attached stderr = %q", got)
	}
	if ev.order[0] != "started" || ev.exited == nil {
		t.Errorf("attach events %v", ev.order)
	}

	// Its start and exit are in the activity log. The exit record is written
	// by the process's watcher, which may finish just after Wait returns:
	// follow the log until all three are there (or 10 s pass).
	var kinds []string
	wctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_ = ts.activity.Watch(wctx, 0, true, func(r activity.Record) error {
		if r.ObjectID == id {
			kinds = append(kinds, r.Kind)
		}
		if len(kinds) == 3 {
			return errDone
		}
		return nil
	})
	slices.Sort(kinds)
	if !slices.Equal(kinds, []string{"process.exit", "process.input", "process.start"}) {
		t.Errorf("activity kinds for %s: %v", id, kinds)
	}
}

func TestProcessAttachGap(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	c := agentdv1.NewProcessServiceClient(ts.Conn)
	ev := startAndRead(t, c, &agentdv1.StartRequest{
		Argv:            []string{"head", "-c", "1000000", "/dev/zero"},
		RetainHeadBytes: 1000, RetainTailBytes: 100_000,
	})
	if n := len(ev.out[agentdv1.OutputStream_OUTPUT_STREAM_STDOUT]); n != 1_000_000 || len(ev.gaps) != 0 {
		t.Fatalf("live: %d bytes, gaps %v", n, ev.gaps)
	}
	at, err := c.Attach(t.Context(), &agentdv1.AttachRequest{Id: ev.started.Id})
	if err != nil {
		t.Fatal(err)
	}
	late := readEvents(t, attachStream{at}, nil)
	if want := []string{"started", "output", "gap", "output", "exited"}; !slices.Equal(late.order, want) {
		t.Errorf("late attach events %v, want %v", late.order, want)
	}
	wantGap := []*agentdv1.Gap{{Stream: agentdv1.OutputStream_OUTPUT_STREAM_STDOUT, Offset: 1000, Bytes: 1_000_000 - 1000 - 100_000}}
	if diff := cmp.Diff(late.gaps, wantGap, protocmp.Transform()); diff != "" {
		t.Errorf("gaps (-got +want):\n%s", diff)
	}
	if st := late.exited.Streams[0]; st.TotalBytes != 1_000_000 || st.OmittedBytes != wantGap[0].Bytes {
		t.Errorf("stats %v", st)
	}

	_, err = c.Attach(t.Context(), &agentdv1.AttachRequest{Id: "p-nope"})
	if err == nil {
		at, _ := c.Attach(t.Context(), &agentdv1.AttachRequest{Id: "p-nope"})
		_, err = at.Recv()
	}
	wantCode(t, err, codes.NotFound, "no process")
}

func TestProcessSignalTimeoutPty(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	c := agentdv1.NewProcessServiceClient(ts.Conn)

	// Timeout: TERM to the group, timed_out, no invented exit status.
	ev := startAndRead(t, c, &agentdv1.StartRequest{Command: "sleep 300", Timeout: durationpb.New(100 * time.Millisecond)})
	if x := ev.exited; !x.TimedOut || x.Signal != "TERM" || x.SignalNumber != 15 || x.ExitCode != -1 {
		t.Errorf("timed out exit = %v", x)
	}

	// Signal with a grace: KILL follows a TERM that is ignored.
	st, err := c.Start(t.Context(), &agentdv1.StartRequest{Command: "trap '' TERM; echo ready; sleep 300"})
	if err != nil {
		t.Fatal(err)
	}
	ev = readEvents(t, startStream{st}, func(e *events) bool { return len(e.out[agentdv1.OutputStream_OUTPUT_STREAM_STDOUT]) > 0 })
	if _, err := c.Signal(t.Context(), &agentdv1.SignalRequest{Id: ev.started.Id, Signal: "sigterm", Grace: durationpb.New(100 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	rest := readEvents(t, startStream{st}, nil)
	if rest.exited.GetSignal() != "KILL" {
		t.Errorf("exit after ignored TERM = %v", rest.exited)
	}
	_, err = c.Signal(t.Context(), &agentdv1.SignalRequest{Id: ev.started.Id})
	wantCode(t, err, codes.FailedPrecondition, "already exited")
	_, err = c.Signal(t.Context(), &agentdv1.SignalRequest{Id: ev.started.Id, Signal: "BOGUS"})
	wantCode(t, err, codes.InvalidArgument, "unknown signal")

	// Pty: one stream, resizable.
	st, err = c.Start(t.Context(), &agentdv1.StartRequest{Command: "read x; stty size", Pty: &agentdv1.PtySize{Rows: 10, Cols: 20}})
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	id := first.GetEvent().GetStarted().GetId()
	if _, err := c.Resize(t.Context(), &agentdv1.ResizeRequest{Id: id, Size: &agentdv1.PtySize{Rows: 33, Cols: 99}}); err != nil {
		t.Fatal(err)
	}
	in, err := c.Input(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Send(&agentdv1.InputRequest{Id: id, Data: []byte("\n")}); err != nil {
		t.Fatal(err)
	}
	if _, err := in.CloseAndRecv(); err != nil {
		t.Fatal(err)
	}
	ev = readEvents(t, startStream{st}, nil)
	if got := string(ev.out[agentdv1.OutputStream_OUTPUT_STREAM_PTY]); !strings.Contains(got, "33 99\r\n") {
		t.Errorf("pty output = %q", got)
	}
	_, err = c.Resize(t.Context(), &agentdv1.ResizeRequest{Id: id})
	wantCode(t, err, codes.InvalidArgument, "rows and cols")
}

func TestProcessInputErrors(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	c := agentdv1.NewProcessServiceClient(ts.Conn)
	for _, tc := range []struct {
		msgs []*agentdv1.InputRequest
		code codes.Code
		msg  string
	}{
		{nil, codes.InvalidArgument, "first message must name the process"},
		{[]*agentdv1.InputRequest{{Data: []byte("x")}}, codes.InvalidArgument, "must name the process"},
		{[]*agentdv1.InputRequest{{Id: "p-nope", Data: []byte("x")}}, codes.NotFound, "no process"},
	} {
		in, err := c.Input(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range tc.msgs {
			_ = in.Send(m)
		}
		_, err = in.CloseAndRecv()
		wantCode(t, err, tc.code, tc.msg)
	}
}

// TestProcessEnvNoSecrets: AGENTD_* variables of the daemon never reach a
// command, nor do its descriptors.
func TestProcessEnvNoSecrets(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{Env: append(os.Environ(), "AGENTD_TOKEN=secret")})
	c := agentdv1.NewProcessServiceClient(ts.Conn)
	ev := startAndRead(t, c, &agentdv1.StartRequest{Command: "env; ls /proc/self/fd >&2"})
	if out := ev.out[agentdv1.OutputStream_OUTPUT_STREAM_STDOUT]; bytes.Contains(out, []byte("AGENTD_")) {
		t.Errorf("child env has AGENTD_*: %s", out)
	}
	if got := strings.Fields(string(ev.out[agentdv1.OutputStream_OUTPUT_STREAM_STDERR])); !slices.Equal(got, []string{"0", "1", "2", "3"}) {
		t.Errorf("child fds = %v", got)
	}
}

func TestProcessWaitDeadline(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	c := agentdv1.NewProcessServiceClient(ts.Conn)
	st, err := c.Start(t.Context(), &agentdv1.StartRequest{Argv: []string{"sleep", "300"}, Tag: filepath.Base(t.Name())})
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err = c.Wait(ctx, &agentdv1.WaitRequest{Id: first.GetEvent().GetStarted().GetId()})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("Wait = %v, want DeadlineExceeded", err)
	}
	// The server's shutdown stops the sleep (TERM).
}

// errDone ends a Watch callback loop early.
var errDone = errors.New("done")
