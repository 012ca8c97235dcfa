package hub_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// BenchmarkTerminalKeystroke is a keystroke's round trip — a byte typed
// until the PTY's echo of it arrives — on a paired machine's `cat` in a
// pty: through the console's websocket (the page's path), and, as the
// baseline of the same run, as a gRPC client of the hub (Input and Attach
// streams, agentctl's path).
func BenchmarkTerminalKeystroke(b *testing.B) {
	h := newBenchHub(b, zap.NewNop())
	id := h.startDaemon()
	b.Run("console-websocket", func(b *testing.B) {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.PostForm(h.url+"/console/signin", url.Values{"token": {h.token}})
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		u, _ := url.Parse(h.url + "/console/terminal/" + id + "/ws")
		hdr := http.Header{}
		for _, ck := range jar.Cookies(u) {
			hdr.Add("Cookie", ck.Name+"="+ck.Value)
		}
		ws, _, err := websocket.Dial(b.Context(), "ws"+strings.TrimPrefix(u.String(), "http"), &websocket.DialOptions{HTTPHeader: hdr})
		if err != nil {
			b.Fatal(err)
		}
		defer ws.CloseNow()
		// The shell execs cat, so every byte typed comes back once (the
		// pty's echo) and nothing else does. The key is a Z, which no
		// prompt before has (the first round trip waits for its own echo,
		// so every later one does too).
		if err := ws.Write(b.Context(), websocket.MessageBinary, []byte("exec cat\r")); err != nil {
			b.Fatal(err)
		}
		roundTrip := func(key byte) {
			if err := ws.Write(b.Context(), websocket.MessageBinary, []byte{key}); err != nil {
				b.Fatal(err)
			}
			for {
				typ, data, err := ws.Read(b.Context())
				if err != nil {
					b.Fatal(err)
				}
				if typ == websocket.MessageBinary && bytes.IndexByte(data[8:], key) >= 0 {
					return
				}
			}
		}
		time.Sleep(500 * time.Millisecond) // let the shell become cat: setup, not measured
		for range 20 {
			roundTrip('Z')
		}
		var ds []time.Duration
		for b.Loop() {
			t0 := time.Now()
			roundTrip('Z')
			ds = append(ds, time.Since(t0))
		}
		reportPercentiles(b, ds)
	})
	b.Run("grpc-through-hub", func(b *testing.B) {
		c := agentdv1.NewProcessServiceClient(h.conn())
		ctx, cancel := context.WithCancel(authCtx(b.Context(), h.token, id))
		defer cancel()
		st, err := c.Start(ctx, &agentdv1.StartRequest{Argv: []string{"cat"}, OpenStdin: true, Pty: &agentdv1.PtySize{Rows: 24, Cols: 80}})
		if err != nil {
			b.Fatal(err)
		}
		first, err := st.Recv()
		if err != nil {
			b.Fatal(err)
		}
		pid := first.GetEvent().GetStarted().GetId()
		defer func() {
			_, _ = c.Signal(authCtx(context.Background(), h.token, id), &agentdv1.SignalRequest{Id: pid, Signal: "KILL"})
		}()
		in, err := c.Input(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := in.Send(&agentdv1.InputRequest{Id: pid}); err != nil {
			b.Fatal(err)
		}
		roundTrip := func(key byte) {
			if err := in.Send(&agentdv1.InputRequest{Data: []byte{key}}); err != nil {
				b.Fatal(err)
			}
			for {
				m, err := st.Recv()
				if err != nil {
					b.Fatal(err)
				}
				if bytes.IndexByte(m.GetEvent().GetOutput().GetData(), key) >= 0 {
					return
				}
			}
		}
		for range 20 {
			roundTrip('Z')
		}
		var ds []time.Duration
		for b.Loop() {
			t0 := time.Now()
			roundTrip('Z')
			ds = append(ds, time.Since(t0))
		}
		reportPercentiles(b, ds)
	})
}
