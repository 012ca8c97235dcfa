package hub_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/devdepot-ai/agentd/internal/testca"
)

// rawCall is a hostile gRPC client: it opens an HTTP/2 connection to addr
// and sends the headers of a call to an authenticated method, with token
// ("": none) and padBytes of metadata in 16 KiB values, ignoring the limit the
// server advertised; no body, no end of stream: the call stays open. It
// then pings and returns what came back first: "ping" (the server
// read the headers and waits for the call's body), "rst" (the stream
// refused), "goaway"/"eof" (the connection), or "status N" (an answer).
func rawCall(addr, token string, padBytes int) (string, net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return "", nil, err
	}
	return rawCallOn(c, addr, token, padBytes, 0)
}

// rawCallOn is rawCall on a connection already made (c is closed on an
// error). With settle, a ping answered first is followed by up to settle
// for an answer to the call.
func rawCallOn(c net.Conn, addr, token string, padBytes int, settle time.Duration) (string, net.Conn, error) {
	pinged := false
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		c.Close()
		return "", nil, err
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		c.Close()
		return "", nil, err
	}
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":path", "/agentd.hub.v1.AdminService/ListMachines"},
		{":authority", addr}, {"content-type", "application/grpc"}, {"te", "trailers"},
	} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if token != "" {
		_ = enc.WriteField(hpack.HeaderField{Name: "authorization", Value: "Bearer " + token})
	}
	val := strings.Repeat("x", 16<<10)
	for i := 0; i*len(val) < padBytes; i++ {
		_ = enc.WriteField(hpack.HeaderField{Name: "x-pad-" + strconv.Itoa(i), Value: val, Sensitive: true})
	}
	b := block.Bytes()
	const max = 16 << 10
	first := b[:min(max, len(b))]
	b = b[len(first):]
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: first, EndHeaders: len(b) == 0}); err != nil {
		c.Close()
		return "", nil, err
	}
	for len(b) > 0 {
		n := min(max, len(b))
		if err := fr.WriteContinuation(1, n == len(b), b[:n]); err != nil {
			c.Close()
			return "eof", c, nil // the server hung up while we sent
		}
		b = b[n:]
	}
	if err := fr.WritePing(false, [8]byte{1}); err != nil {
		return "eof", c, nil
	}
	for {
		f, err := fr.ReadFrame()
		var ne net.Error
		if pinged && errors.As(err, &ne) && ne.Timeout() {
			return "ping", c, nil
		}
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF) || isReset(err) {
				return "eof", c, nil
			}
			c.Close()
			return "", nil, err
		}
		switch f := f.(type) {
		case *http2.PingFrame:
			if !f.IsAck() {
				break
			}
			if settle == 0 || pinged {
				return "ping", c, nil
			}
			// net/http answers pings on its own while a handler runs:
			// give the handler settle to answer before calling it "ping".
			pinged = true
			_ = c.SetReadDeadline(time.Now().Add(settle))
		case *http2.RSTStreamFrame:
			return "rst", c, nil
		case *http2.GoAwayFrame:
			return "goaway", c, nil
		case *http2.MetaHeadersFrame:
			return "status " + f.PseudoValue("status") + " grpc-status " + fieldValue(f, "grpc-status"), c, nil
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		}
	}
}

func fieldValue(f *http2.MetaHeadersFrame, name string) string {
	for _, hf := range f.Fields {
		if hf.Name == name {
			return hf.Value
		}
	}
	return ""
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && strings.Contains(op.Err.Error(), "reset")
}

// A call without a token carrying 1 MB of metadata is refused as its
// headers arrive (before: the hub read them all and waited for the call's
// body: it held 16 MB of headers of any client, per call); one with less
// is answered UNAUTHENTICATED as soon as its headers are read.
func TestHugeMetadataRefusedBeforeAuth(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	for _, tc := range []struct {
		token string
		pad   int
		want  []string
	}{
		{pad: 1 << 20, want: []string{"rst", "goaway", "eof"}},
		{token: h.owner, pad: 1 << 20, want: []string{"rst", "goaway", "eof"}},
		// Below the limit, without a token or with one the hub does not
		// know: refused UNAUTHENTICATED at once, without waiting for the
		// call's body (before: held open until it came).
		{pad: 32 << 10, want: []string{"status 200 grpc-status 16"}},
		{token: "agt_" + strings.Repeat("A", 43), pad: 32 << 10, want: []string{"status 200 grpc-status 16"}},
		// With the owner's token the call is taken and waits for its body.
		{token: h.owner, pad: 32 << 10, want: []string{"ping"}},
	} {
		got, c, err := rawCall(h.addr, tc.token, tc.pad)
		if err != nil {
			t.Fatalf("%d bytes of metadata: %v", tc.pad, err)
		}
		c.Close()
		if !slices.Contains(tc.want, got) {
			t.Errorf("%d bytes of metadata, token %.8q: the hub answered %q, want one of %q", tc.pad, tc.token, got, tc.want)
		}
	}
}

// rssKiB reads a field (VmRSS, VmHWM) of /proc/PID/status in KiB.
func rssKiB(t *testing.T, pid int, field string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// Many clients without a token, each sending 12 MB of metadata and holding
// the call open, leave the hub process's memory where it was (before: 12
// such clients took it from ~36 MB to ~650 MiB).
func TestUnauthenticatedHeadersMemoryBounded(t *testing.T) {
	t.Parallel()
	p := startHubProc(t, 0)
	pid := p.cmd.Process.Pid
	before := rssKiB(t, pid, "VmRSS")
	const clients, pad = 12, 12 << 20
	var wg sync.WaitGroup
	got := make([]string, clients)
	for i := range clients {
		wg.Go(func() {
			r, c, err := rawCall(p.addr, "", pad)
			if err != nil {
				t.Errorf("client %d: %v", i, err)
				return
			}
			got[i] = r
			t.Cleanup(func() { c.Close() })
		})
	}
	wg.Wait()
	// Every client's headers were read (or refused) by now; the calls
	// that were taken are still open.
	rss, peak := rssKiB(t, pid, "VmRSS"), rssKiB(t, pid, "VmHWM")
	t.Logf("hub RSS %d KiB before, %d KiB with %d clients holding %d MB of headers each (peak %d KiB); they got %q",
		before, rss, clients, pad>>20, peak, got)
	if grew := rss - before; grew > 64<<10 {
		t.Errorf("hub RSS grew by %d MiB under %d unauthenticated clients, want < 64 MiB", grew>>10, clients)
	}
	if p.exited() {
		t.Fatalf("agenthub exited: %v", p.err)
	}
}

// The same gate holds for gRPC that net/http serves: a TLS client that
// offers http/1.1 as well as h2 (see the splitter) and then speaks gRPC.
func TestTokenGateOverNetHTTP(t *testing.T) {
	t.Parallel()
	ca := testca.New(t)
	h := startHubTLS(t, ca)
	for _, tc := range []struct {
		token string
		want  string
	}{
		{"", "status 200 grpc-status 16"},
		{"agt_" + strings.Repeat("A", 43), "status 200 grpc-status 16"},
		{h.owner, "ping"},
	} {
		c, err := tls.Dial("tcp", h.addr, &tls.Config{RootCAs: ca.Pool, NextProtos: []string{"h2", "http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
			c.Close()
			t.Fatalf("negotiated %q, want h2", p)
		}
		got, c2, err := rawCallOn(c, h.addr, tc.token, 32<<10, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c2.Close()
		if got != tc.want {
			t.Errorf("token %.8q through net/http: the hub answered %q, want %q", tc.token, got, tc.want)
		}
	}
}
