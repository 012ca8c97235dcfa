package agentd

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/devdepot-ai/agentd/internal/activity"
	"github.com/devdepot-ai/agentd/internal/wire"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// listenTCP listens on addr and runs serve on each connection it accepts.
func listenTCP(t *testing.T, addr string, serve func(*net.TCPConn)) (port uint32) {
	t.Helper()
	l, err := net.Listen("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c.(*net.TCPConn))
			}()
		}
	}()
	return uint32(l.Addr().(*net.TCPAddr).Port)
}

// echo copies what it reads back until EOF, then half-closes.
func echo(c *net.TCPConn) {
	_, _ = io.Copy(c, c)
	_ = c.CloseWrite()
}

// connect opens a Connect call to port and waits for connected.
func connect(t *testing.T, ts *testServer, port uint32) agentdv1.PortService_ConnectClient {
	t.Helper()
	st, err := agentdv1.NewPortServiceClient(ts.Conn).Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&agentdv1.ConnectRequest{Port: port}); err != nil {
		t.Fatal(err)
	}
	m, err := st.Recv()
	if err != nil || !m.GetConnected() {
		t.Fatalf("first answer %v, %v; want connected", m, err)
	}
	return st
}

// drain reads a Connect call to its end: the bytes, whether eof came, and
// the call's end.
func drain(st agentdv1.PortService_ConnectClient) ([]byte, bool, error) {
	var got []byte
	eof := false
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return got, eof, nil
		}
		if err != nil {
			return got, eof, err
		}
		if eof && len(m.GetData()) > 0 {
			return got, eof, errors.New("data after eof")
		}
		got = append(got, m.GetData()...)
		eof = eof || m.GetEof()
	}
}

// A megabyte through a real echo server comes back whole; the caller's
// half-close reaches the server, whose half-close ends the call well, and
// the audit log has the connection with its bytes.
func TestPortConnectEcho(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	port := listenTCP(t, "127.0.0.1:0", echo)
	st := connect(t, ts, port)
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	go func() {
		for b := want; len(b) > 0; {
			n := min(len(b), 50000)
			if st.Send(&agentdv1.ConnectRequest{Data: b[:n]}) != nil {
				return
			}
			b = b[n:]
		}
		_ = st.CloseSend()
	}()
	got, eof, err := drain(st)
	if err != nil || !eof || !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes (equal %v), eof %v, err %v; want the %d sent back, eof, no error", len(got), bytes.Equal(got, want), eof, err, len(want))
	}
	recs := waitRecords(t, ts, wire.KindPortConnect, 1)
	r := recs[0]
	if r.Bytes != 2*int64(len(want)) || r.Outcome != "ok" || r.ObjectID != strconv.Itoa(int(port)) || r.Duration <= 0 ||
		!strings.Contains(r.Summary, "127.0.0.1:"+strconv.Itoa(int(port))) {
		t.Errorf("record %+v; want ok, %d bytes, the port", r, 2*len(want))
	}
}

// Half-close works both ways: the target's close of its side arrives as
// eof while the caller can still send, and what it sends then arrives.
func TestPortConnectHalfClose(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	heard := make(chan string, 1)
	port := listenTCP(t, "127.0.0.1:0", func(c *net.TCPConn) {
		_, _ = c.Write([]byte("hello"))
		_ = c.CloseWrite()
		b, _ := io.ReadAll(c)
		heard <- string(b)
	})
	st := connect(t, ts, port)
	var got []byte
	for {
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("before eof: %v", err)
		}
		got = append(got, m.GetData()...)
		if m.GetEof() {
			break
		}
	}
	if string(got) != "hello" {
		t.Fatalf("got %q before eof, want hello", got)
	}
	if err := st.Send(&agentdv1.ConnectRequest{Data: []byte("after your eof")}); err != nil {
		t.Fatal(err)
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := drain(st); err != nil {
		t.Fatalf("end: %v", err)
	}
	select {
	case h := <-heard:
		if h != "after your eof" {
			t.Errorf("server heard %q", h)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("server never saw the caller's half-close")
	}
}

// Bad requests fail with a clear error and dial nothing: no port, a port
// out of range, data before connected, and a port nothing listens on.
func TestPortConnectBadInput(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	free, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := uint32(free.Addr().(*net.TCPAddr).Port)
	free.Close()
	for _, tc := range []struct {
		name  string
		first *agentdv1.ConnectRequest // nil: half-close at once
		code  codes.Code
		msg   string
	}{
		{"no message", nil, codes.InvalidArgument, "must name the port"},
		{"port 0", &agentdv1.ConnectRequest{}, codes.InvalidArgument, "port 0: want 1-65535"},
		{"port too big", &agentdv1.ConnectRequest{Port: 70000}, codes.InvalidArgument, "port 70000: want 1-65535"},
		{"data first", &agentdv1.ConnectRequest{Port: closed, Data: []byte("x")}, codes.InvalidArgument, "names the port only"},
		{"nothing listens", &agentdv1.ConnectRequest{Port: closed}, codes.Unavailable, "nothing listens on 127.0.0.1:" + strconv.Itoa(int(closed))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := agentdv1.NewPortServiceClient(ts.Conn).Connect(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if tc.first != nil {
				_ = st.Send(tc.first)
			}
			_ = st.CloseSend()
			_, err = st.Recv()
			if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.msg) {
				t.Errorf("got %v; want %v containing %q", err, tc.code, tc.msg)
			}
		})
	}
}

// No request names another host: a server on another loopback address
// (127.0.0.2) with the same port is never reached, even when the request
// carries a host in a field the daemon does not know — it dials
// 127.0.0.1:PORT, where nothing listens.
func TestPortConnectOnlyLoopback(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("127.0.0.2 is a loopback address on Linux only")
	}
	ts := newTestServer(t, Options{})
	reached := make(chan struct{}, 1)
	port := listenTCP(t, "127.0.0.2:0", func(*net.TCPConn) { reached <- struct{}{} })
	if l, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(int(port))); err == nil {
		l.Close() // free on 127.0.0.1: the dial there is refused
	} else {
		t.Skipf("port %d is taken on 127.0.0.1 too", port)
	}

	// Field 15, a host string the message does not define: an unknown field.
	var raw []byte
	raw = protowire.AppendTag(raw, 1, protowire.VarintType)
	raw = protowire.AppendVarint(raw, uint64(port))
	raw = protowire.AppendTag(raw, 15, protowire.BytesType)
	raw = protowire.AppendString(raw, "127.0.0.2")
	req := &agentdv1.ConnectRequest{}
	req.ProtoReflect().SetUnknown(raw)

	st, err := agentdv1.NewPortServiceClient(ts.Conn).Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Send(req)
	_ = st.CloseSend()
	_, err = st.Recv()
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "127.0.0.1:"+strconv.Itoa(int(port))) {
		t.Errorf("got %v; want unavailable: nothing on 127.0.0.1:%d", err, port)
	}
	select {
	case <-reached:
		t.Error("the server on 127.0.0.2 was reached")
	default:
	}
}

// List shows a listener of this process, with this process as its owner.
func TestPortList(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("ports are listed on Linux only")
	}
	ts := newTestServer(t, Options{})
	port := listenTCP(t, "127.0.0.1:0", echo)
	resp, err := agentdv1.NewPortServiceClient(ts.Conn).List(t.Context(), &agentdv1.PortServiceListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range resp.GetPorts() {
		if p.GetPort() == port {
			if p.GetAddress() != "127.0.0.1" || p.GetNetwork() != "tcp" || int(p.GetPid()) != os.Getpid() || p.GetCommand() == "" {
				t.Errorf("port %d: %v; want 127.0.0.1 tcp, pid %d", port, p, os.Getpid())
			}
			return
		}
	}
	t.Errorf("port %d not listed in %v", port, resp.GetPorts())
}

// waitRecords waits for n records of kind in the daemon's audit log (a
// connection is recorded once its handler has returned, a moment after
// the caller sees the call end).
func waitRecords(t *testing.T, ts *testServer, kind string, n int) []activity.Record {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got []activity.Record
		_ = ts.activity.Watch(t.Context(), 0, false, func(r activity.Record) error {
			if r.Kind == kind {
				got = append(got, r)
			}
			return nil
		})
		if len(got) >= n || time.Now().After(deadline) {
			if len(got) < n {
				t.Fatalf("%d %s records, want %d", len(got), kind, n)
			}
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A server on the IPv6 loopback only (127.0.0.1 refuses) is reached on
// ::1, and the audit log names that address.
func TestPortConnectIPv6Loopback(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				echo(c.(*net.TCPConn))
			}()
		}
	}()
	port := uint32(l.Addr().(*net.TCPAddr).Port)
	if c, err := net.Dial("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))); err == nil {
		c.Close()
		t.Skipf("something listens on 127.0.0.1:%d too", port)
	}
	ts := newTestServer(t, Options{})
	st := connect(t, ts, port)
	if err := st.Send(&agentdv1.ConnectRequest{Data: []byte("over six")}); err != nil {
		t.Fatal(err)
	}
	_ = st.CloseSend()
	got, eof, err := drain(st)
	if err != nil || !eof || string(got) != "over six" {
		t.Fatalf("got %q, eof %v, err %v; want the echo", got, eof, err)
	}
	recs := waitRecords(t, ts, wire.KindPortConnect, 1)
	if r := recs[0]; r.Outcome != "ok" || !strings.Contains(r.Summary, "[::1]:"+strconv.Itoa(int(port))) {
		t.Errorf("record %+v; want ok naming [::1]:%d", r, port)
	}
}
