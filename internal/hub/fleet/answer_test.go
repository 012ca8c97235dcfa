package fleet

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/devdepot-ai/agentd/agentd"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// Route.Answer and Route.Edit between a client and a real daemon: an
// error the daemon sent before anything else is replaced by the frames
// Answer makes from the caller's request (or kept, or made another error,
// as it says); Edit rewrites the daemon's answers; a call that got frames
// is not answered again.
func TestProxyAnswerAndEdit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := agentd.New(t.Context(), agentd.Options{Workspace: ws, StateDir: filepath.Join(dir, "state"), Env: os.Environ(), Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	machine := dialUnix(t, serveUnix(t, dir, "d.sock", func(l net.Listener) error { return d.Serve(ctx, l) }, cancel))

	var mu sync.Mutex // the proxy's handlers run on the server's goroutines
	answered := map[string]int{}
	hubSrv := grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}), grpc.UnknownServiceHandler(Proxy(
		func(ctx context.Context, method string) (Route, error) {
			r := Route{Conn: machine, MD: metadata.MD{}}
			r.Answer = func(req []byte, err error) ([][]byte, error) {
				mu.Lock()
				answered[method]++
				mu.Unlock()
				var w agentdv1.WaitRequest
				if proto.Unmarshal(req, &w) != nil || status.Code(err) != codes.NotFound {
					return nil, err
				}
				switch w.GetId() {
				case "p-ended":
					b, _ := proto.Marshal(&agentdv1.WaitResponse{Process: &agentdv1.ProcessInfo{Id: "p-ended",
						Exited: &agentdv1.Exited{ExitCode: -1, Signal: "TERM", Reason: "sandbox stopped by alice"}}})
					return [][]byte{b}, nil
				case "p-said":
					return nil, status.Error(codes.NotFound, "p-said ended: sandbox deleted")
				}
				return nil, err
			}
			if method == "/agentd.v1.ProcessService/List" {
				r.Edit = func(b []byte) []byte {
					var l agentdv1.ProcessServiceListResponse
					if err := proto.Unmarshal(b, &l); err != nil {
						t.Errorf("Edit got a frame that is no List answer: %v", err)
					}
					l.Processes = append([]*agentdv1.ProcessInfo{{Id: "p-ended"}}, l.Processes...)
					out, _ := proto.Marshal(&l)
					return out
				}
			}
			return r, nil
		})))
	hub := dialUnix(t, serveUnix(t, dir, "h.sock", hubSrv.Serve, hubSrv.Stop))
	procs := agentdv1.NewProcessServiceClient(hub)
	cctx := t.Context()

	w, err := procs.Wait(cctx, &agentdv1.WaitRequest{Id: "p-ended"})
	if err != nil || w.GetProcess().GetExited().GetReason() != "sandbox stopped by alice" {
		t.Errorf("Wait for a process the daemon does not know, answered: %v %v", w, err)
	}
	if _, err := procs.Wait(cctx, &agentdv1.WaitRequest{Id: "p-said"}); status.Code(err) != codes.NotFound || status.Convert(err).Message() != "p-said ended: sandbox deleted" {
		t.Errorf("Wait whose answer is another error: %v", err)
	}
	if _, err := procs.Wait(cctx, &agentdv1.WaitRequest{Id: "p-other"}); status.Code(err) != codes.NotFound {
		t.Errorf("Wait Answer leaves alone: %v, want the daemon's NotFound", err)
	}
	l, err := procs.List(cctx, &agentdv1.ProcessServiceListRequest{})
	if err != nil || len(l.GetProcesses()) != 1 || l.GetProcesses()[0].GetId() != "p-ended" {
		t.Errorf("List with Edit: %v %v, want p-ended added", l, err)
	}
	// A call that got frames before its error is not answered.
	st, err := procs.Start(cctx, &agentdv1.StartRequest{Argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := st.Recv(); err != nil {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if answered["/agentd.v1.ProcessService/Start"] != 0 || answered["/agentd.v1.ProcessService/List"] != 0 {
		t.Errorf("Answer asked of calls that ended well: %v", answered)
	}
}
