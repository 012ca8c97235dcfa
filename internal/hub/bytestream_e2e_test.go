package hub_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
	"github.com/devdepot-ai/agentd/transport"
)

// bigServer serves /big (size bytes of a pattern) and /ws (a WebSocket
// echo) on loopback; it returns the port and the body's digest.
func bigServer(t *testing.T, size int) (int, [32]byte) {
	t.Helper()
	body := bytes.Repeat([]byte("agentd byte stream\n"), size/19+1)[:size]
	mux := http.NewServeMux()
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) })
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, b, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, append([]byte("echo: "), b...)); err != nil {
				return
			}
		}
	})
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().(*net.TCPAddr).Port, sha256.Sum256(body)
}

// metric reads one unlabelled counter of the hub's /metrics (-1: absent).
func (h *hubEnv) metric(name string) int64 {
	h.t.Helper()
	req, err := http.NewRequestWithContext(h.t.Context(), http.MethodGet, h.url+"/metrics", nil)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+h.owner)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// A preview of a machine whose daemon takes byte streams goes over them
// (a download whole and intact, a WebSocket echo); the same preview of a
// daemon from before byte streams still works, in messages.
func TestPreviewByteStream(t *testing.T) {
	h, _ := startPreviewHub(t)
	port, sum := bigServer(t, 8<<20+123)
	for _, tc := range []struct {
		name    string
		old     bool
		streams int64 // byte streams per preview connection
	}{{name: "current daemon", streams: 1}, {name: "daemon before byte streams", old: true, streams: 0}} {
		t.Run(tc.name, func(t *testing.T) {
			m := h.startMachineWith(h.owner, &machine{old: tc.old})
			code, out, stderr := h.agentctl(h.owner, m.id, "port", "expose", fmt.Sprint(port), "--access", "public")
			if code != 0 {
				t.Fatalf("expose: exit %d %s", code, stderr)
			}
			base := strings.TrimSpace(out)
			before := h.metric("agenthub_byte_streams_total")

			// A new client connection each: the preview's upstream
			// connections are kept alive, so count by what it dialled.
			resp, err := http.Get(base + "big")
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || sha256.Sum256(got) != sum {
				t.Fatalf("GET big: %d, %d bytes, %v; want 200 and the whole body", resp.StatusCode, len(got), err)
			}

			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			ws, _, err := websocket.Dial(ctx, strings.Replace(base, "http://", "ws://", 1)+"ws", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.CloseNow()
			if err := ws.Write(ctx, websocket.MessageText, []byte("hi")); err != nil {
				t.Fatal(err)
			}
			if _, b, err := ws.Read(ctx); err != nil || string(b) != "echo: hi" {
				t.Fatalf("websocket echo: %q, %v", b, err)
			}
			ws.Close(websocket.StatusNormalClosure, "")

			after := h.metric("agenthub_byte_streams_total")
			if n := after - before; before < 0 || (tc.streams > 0 && n < tc.streams) || (tc.streams == 0 && n != 0) {
				t.Errorf("byte streams %d → %d; want %s", before, after, map[bool]string{true: "none", false: "at least one per upstream connection"}[tc.streams == 0])
			}
		})
	}
}

// agentctl port forward carries each connection on byte streams: its own
// to the hub and the daemon's; with a daemon from before byte streams
// only its own (the hub relays to the daemon's messages); an agentctl
// from before them (AGENTCTL_BYTE_STREAMS=0 sends what it sent) none, as
// today. Every way carries 4 MiB each way with half-closes intact.
func TestPortForwardByteStream(t *testing.T) {
	h := startHub(t)
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(h.owner), 0o600); err != nil {
		t.Fatal(err)
	}
	echoPort := tcpEcho(t)
	current := h.startMachine(h.owner)
	old := h.startMachineWith(h.owner, &machine{old: true})
	for _, tc := range []struct {
		name       string
		m          *machine
		oldCtl     bool
		perConnect int64
	}{
		{name: "current agentctl and daemon", m: current, perConnect: 2},
		{name: "daemon before byte streams", m: old, perConnect: 1},
		{name: "agentctl before byte streams", m: current, oldCtl: true, perConnect: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.oldCtl {
				t.Setenv("AGENTCTL_BYTE_STREAMS", "0")
			}
			addrs, stop := forward(t, "--hub", h.url, "--machine", tc.m.id, "--token-file", tf, "port", "forward", ":"+strconv.Itoa(echoPort))
			before := h.metric("agenthub_byte_streams_total")
			echoRoundTrip(t, addrs[0], 4<<20)
			echoRoundTrip(t, addrs[0], 1)
			// The hub counts a stream as it hands it over, before the
			// bytes: both connections' are in.
			if got := h.metric("agenthub_byte_streams_total") - before; got != 2*tc.perConnect {
				t.Errorf("byte streams for two connections: %d, want %d", got, 2*tc.perConnect)
			}
			if code, stderr := stop(); code != 0 || stderr != "" {
				t.Errorf("after interrupt: exit %d, stderr %q; want 0 and nothing", code, stderr)
			}
		})
	}
}

// A caller that asked for a byte stream but cannot open it (its upgrade
// landed on another replica, or a proxy dropped it) declines with an empty
// message, as agentctl does, and the hub carries the connection in the
// call's messages, half-closes included.
func TestPortConnectStreamDeclined(t *testing.T) {
	h := startHub(t)
	m := h.startMachine(h.owner)
	echoPort := tcpEcho(t)
	ctx, cancel := context.WithTimeout(authCtx(t.Context(), h.owner, m.id), 60*time.Second)
	defer cancel()
	st, err := agentdv1.NewPortServiceClient(h.conn()).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&agentdv1.ConnectRequest{Port: uint32(echoPort), Stream: true}); err != nil {
		t.Fatal(err)
	}
	first, err := st.Recv()
	if err != nil || !first.GetConnected() || first.GetStreamToken() == "" {
		t.Fatalf("first answer %v, %v; want connected with a stream token", first, err)
	}
	if err := st.Send(&agentdv1.ConnectRequest{}); err != nil { // declined
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte("declined "), 100_000)
	go func() {
		for b := want; len(b) > 0; b = b[min(len(b), 32<<10):] {
			if st.Send(&agentdv1.ConnectRequest{Data: b[:min(len(b), 32<<10)]}) != nil {
				return
			}
		}
		_ = st.CloseSend()
	}()
	var got []byte
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after %d bytes: %v", len(got), err)
		}
		got = append(got, r.GetData()...)
		if r.GetEof() {
			if _, err := st.Recv(); !errors.Is(err, io.EOF) {
				t.Fatalf("after eof: %v, want the call to end well", err)
			}
			break
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("echo in messages: %d of %d bytes back", len(got), len(want))
	}
	// The token was withdrawn with the decline.
	if c, err := (transport.StreamDialer{URL: mustURL(t, h.url)}).Dial(ctx, first.GetStreamToken()); err == nil {
		c.Close()
		t.Error("the declined token still opens a stream")
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
