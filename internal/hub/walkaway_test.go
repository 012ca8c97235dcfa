//go:build unix

package hub_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// The walk-away tests are not parallel: they count the process's
// goroutines, which other tests would disturb.

// TestHubSurvivesClientThatWalksAway: a client opens 50 streams through the
// hub (commands with open stdin, half-sent writes, attaches) and vanishes
// without cancelling anything, by closing its ClientConn or by dropping its
// TCP connection. The hub keeps serving others promptly, its goroutines go
// back to where they were, the commands keep running and no half-written
// file appears.
func TestHubSurvivesClientThatWalksAway(t *testing.T) {
	for _, tc := range []struct {
		name string
		quit func(cc *grpc.ClientConn, tcp net.Conn)
	}{
		{"close ClientConn", func(cc *grpc.ClientConn, _ net.Conn) { cc.Close() }},
		{"drop TCP", func(cc *grpc.ClientConn, tcp net.Conn) {
			if tc, ok := tcp.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // RST, as when the client's host dies
			}
			tcp.Close()
			cc.Close() // only now, to free the test's own client side
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startHub(t)
			m := h.startMachine(h.owner)
			ctx := authCtx(t.Context(), h.owner, m.id)
			other := agentdv1.NewProcessServiceClient(h.conn())
			h.mustExec(m.id) // warm up: the tunnel's and the hub's steady state
			base := countHubGoroutines()

			// The client that walks away, on a TCP connection the test can drop.
			tcpc := make(chan net.Conn, 1)
			cc, err := grpc.NewClient(h.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
					c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
					if err == nil {
						select {
						case tcpc <- c:
						default: // a redial, after the test dropped the first
						}
					}
					return c, err
				}))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cc.Close() })
			// Streams live on a context nobody cancels while the client is around.
			sctx := context.WithoutCancel(ctx)
			procs := agentdv1.NewProcessServiceClient(cc)
			files := agentdv1.NewFileServiceClient(cc)

			var ids []string
			start := func(req *agentdv1.StartRequest) {
				t.Helper()
				st, err := procs.Start(sctx, req)
				if err != nil {
					t.Fatal(err)
				}
				r, err := st.Recv()
				if err != nil || r.GetEvent().GetStarted() == nil {
					t.Fatalf("Start %v: first event %v, %v; want started", req.GetArgv(), r, err)
				}
				ids = append(ids, r.GetEvent().GetStarted().GetId())
			}
			for range 20 {
				start(&agentdv1.StartRequest{Argv: []string{"sleep", "300"}, Tag: "walkaway"})
			}
			for range 10 {
				start(&agentdv1.StartRequest{Argv: []string{"cat"}, OpenStdin: true, Tag: "walkaway"})
			}
			for i := range 10 {
				st, err := procs.Attach(sctx, &agentdv1.AttachRequest{Id: ids[i]})
				if err != nil {
					t.Fatal(err)
				}
				_ = st // left open
			}
			var targets []string
			for i := range 10 {
				target := filepath.Join(m.ws, fmt.Sprintf("half-%d.txt", i))
				targets = append(targets, target)
				st, err := files.Write(sctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := st.Send(&agentdv1.WriteRequest{Msg: &agentdv1.WriteRequest_Header{Header: &agentdv1.WriteHeader{Path: target}}}); err != nil {
					t.Fatal(err)
				}
				if err := st.Send(&agentdv1.WriteRequest{Msg: &agentdv1.WriteRequest_Data{Data: bytes.Repeat([]byte("half "), 10000)}}); err != nil {
					t.Fatal(err)
				}
				// No CloseSend: the write is left half-sent.
			}
			// The writes reached the daemon: their temp files exist.
			waitFor(t, 5*time.Second, "the half-sent writes' temporary files", func() bool { return len(tempFiles(t, m.ws)) == 10 })

			// The count sees the calls in flight (else the check below proves nothing).
			if n := countHubGoroutines(); n < base+50 {
				t.Fatalf("%d goroutines with 50 calls in flight, baseline %d: the count does not see the calls", n, base)
			}
			// With 50 streams open, others are served promptly.
			h.mustExec(m.id)

			tc.quit(cc, <-tcpc)

			h.mustExec(m.id)
			waitGoroutines(t, base)

			// The commands outlive the client's calls.
			list, err := other.List(ctx, &agentdv1.ProcessServiceListRequest{})
			if err != nil {
				t.Fatal(err)
			}
			running := 0
			for _, p := range list.GetProcesses() {
				if slices.Contains(ids, p.GetId()) {
					if p.GetState() != agentdv1.ProcessState_PROCESS_STATE_RUNNING || syscall.Kill(int(p.GetPid()), 0) != nil {
						t.Errorf("process %s (%v) is %v after its caller walked away, want running", p.GetId(), p.GetArgv(), p.GetState())
					}
					running++
				}
			}
			if running != len(ids) {
				t.Errorf("the daemon lists %d of the %d processes the client started", running, len(ids))
			}
			// No half-written file, and no temporary file left behind.
			for _, target := range targets {
				if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("half-sent write left %s behind (stat: %v)", target, err)
				}
			}
			waitFor(t, 5*time.Second, "the half-sent writes' temporary files to be removed", func() bool { return len(tempFiles(t, m.ws)) == 0 })

			for _, id := range ids {
				if _, err := other.Signal(ctx, &agentdv1.SignalRequest{Id: id, Signal: "KILL"}); err != nil {
					t.Errorf("kill %s: %v", id, err)
				}
			}
		})
	}
}

// TestHubSurvivesSlowReader: a raw HTTP/2 client asks, through the hub, for
// a command that floods output, then stops reading with its TCP connection
// open. The hub keeps serving others; when the client finally vanishes, the
// hub's goroutines go back to where they were and the command keeps running.
func TestHubSurvivesSlowReader(t *testing.T) {
	h := startHub(t)
	m := h.startMachine(h.owner)
	ctx := authCtx(t.Context(), h.owner, m.id)
	other := agentdv1.NewProcessServiceClient(h.conn())
	h.mustExec(m.id)
	base := countHubGoroutines()

	const streams = 3
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fr := http2.NewFramer(c, c)
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	// Big windows: the hub may send as much as it likes; only TCP stops it.
	must(t, fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1}))
	must(t, fr.WriteWindowUpdate(0, 1<<31-1-65535))
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	tag := fmt.Sprintf("flood-%d", time.Now().UnixNano())
	req, err := proto.Marshal(&agentdv1.StartRequest{Command: "yes flood | head -c 200000000; sleep 300", Tag: tag})
	if err != nil {
		t.Fatal(err)
	}
	msg := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(req)))
	msg = append(msg, req...)
	for i := range streams {
		hb.Reset()
		for _, f := range [][2]string{
			{":method", "POST"}, {":scheme", "http"}, {":path", "/agentd.v1.ProcessService/Start"}, {":authority", h.addr},
			{"content-type", "application/grpc"}, {"te", "trailers"},
			{"authorization", "Bearer " + h.owner}, {"agentd-machine", m.id},
		} {
			must(t, enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}))
		}
		id := uint32(2*i + 1)
		must(t, fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true}))
		must(t, fr.WriteData(id, true, msg))
	}
	// Read until the flood is under way on every stream, then read no more.
	got := map[uint32]int{}
	for len(got) < streams || minValue(got) < 1<<20 {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the hub's answer: %v (data so far per stream: %v)", err, got)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				must(t, fr.WriteSettingsAck())
			}
		case *http2.DataFrame:
			got[f.StreamID] += len(f.Data())
		case *http2.RSTStreamFrame:
			t.Fatalf("the hub reset stream %d: %v", f.StreamID, f.ErrCode)
		case *http2.GoAwayFrame:
			t.Fatalf("the hub sent GOAWAY: %v %s", f.ErrCode, f.DebugData())
		}
	}
	c.SetDeadline(time.Time{})

	// The hub is stuck writing to this client; others do not notice.
	h.mustExec(m.id)
	waitFor(t, 10*time.Second, "the flood to fill the buffers", func() bool {
		// Other callers are served while the slow reader's streams are stuck.
		return len(floods(t, other, ctx, tag)) == streams
	})
	h.mustExec(m.id)
	// The count sees the stuck calls: each holds a goroutine in the
	// proxy. (Not "base + streams" in all: goroutines of the tests before
	// this one may still be ending meanwhile.)
	stuck := 0
	for _, g := range hubGoroutines() {
		if strings.Contains(g, "internal/hub/fleet.forward(") {
			stuck++
		}
	}
	if stuck < streams {
		t.Fatalf("%d goroutines in the hub's proxy with %d calls stuck: the count does not see the calls", stuck, streams)
	}

	// The client vanishes.
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
	h.mustExec(m.id)
	waitGoroutines(t, base)
	for _, p := range floods(t, other, ctx, tag) {
		if p.GetState() != agentdv1.ProcessState_PROCESS_STATE_RUNNING {
			t.Errorf("flooding process %s is %v after its caller vanished, want running", p.GetId(), p.GetState())
		}
		if _, err := other.Signal(ctx, &agentdv1.SignalRequest{Id: p.GetId(), Signal: "KILL"}); err != nil {
			t.Errorf("kill %s: %v", p.GetId(), err)
		}
	}
}

// mustExec runs a command through the hub as another caller and fails the
// test unless it works within a few seconds.
func (h *hubEnv) mustExec(machine string) {
	h.t.Helper()
	start := time.Now()
	code, out, errs := h.agentctl(h.owner, machine, "exec", "--timeout", "10s", "--", "echo", "still here")
	if code != 0 || out != "still here\n" {
		h.t.Fatalf("exec through the hub = %d %q %q, want 0 'still here'", code, out, errs)
	}
	if d := time.Since(start); d > 3*time.Second {
		h.t.Errorf("exec through the hub took %s, want < 3s", d)
	}
}

// floods lists the processes tagged tag.
func floods(t *testing.T, pc agentdv1.ProcessServiceClient, ctx context.Context, tag string) []*agentdv1.ProcessInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	list, err := pc.List(ctx, &agentdv1.ProcessServiceListRequest{})
	if err != nil {
		t.Fatalf("List through the hub while a slow reader stalls: %v", err)
	}
	var out []*agentdv1.ProcessInfo
	for _, p := range list.GetProcesses() {
		if p.GetTag() == tag {
			out = append(out, p)
		}
	}
	return out
}

// tempFiles lists the temporary files of writes in progress in dir.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, ".*.agentd-*.tmp"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// countHubGoroutines counts the goroutines of the process except those
// that belong to the daemon's running commands (their pipe readers and
// waiters, which rightly outlive every call): what is left is the hub,
// the tunnel and the calls in flight.
func countHubGoroutines() int { return len(hubGoroutines()) }

func hubGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "recordStart") ||
			(strings.Contains(g, "/agentd/runner.") && !strings.Contains(g, "google.golang.org/grpc")) {
			continue
		}
		out = append(out, g)
	}
	return out
}

// waitGoroutines waits until the goroutines are back to near base.
func waitGoroutines(t *testing.T, base int) {
	t.Helper()
	const slack = 8
	deadline := time.Now().Add(5 * time.Second)
	for {
		gs := hubGoroutines()
		if len(gs) <= base+slack {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines 5s after the client left, want ≤ %d (baseline %d + %d):\n%s",
				len(gs), base+slack, base, slack, strings.Join(gs, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFor polls cond until it holds or d has passed.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func minValue(m map[uint32]int) int {
	first, v := true, 0
	for _, n := range m {
		if first || n < v {
			first, v = false, n
		}
	}
	return v
}
