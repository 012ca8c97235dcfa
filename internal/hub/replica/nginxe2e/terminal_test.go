package nginxe2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestConsoleTerminalBehindNginx: the console's terminal through nginx's
// configuration (docs/nginx/agenthub.conf) on three replicas: signed in
// over TLS, two pages' websockets (round robin puts them on two replicas,
// so at least one is not the machine's holder and the hub forwards its
// calls), one types and both see the shell's answer.
func TestConsoleTerminalBehindNginx(t *testing.T) {
	c := startCluster(t)
	m := c.pairMachine(t)
	jar, _ := cookiejar.New(nil)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: c.pki.pool(), MinVersion: tls.VersionTLS12}}
	hc := &http.Client{Jar: jar, Timeout: 20 * time.Second, Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.PostForm(c.URL+"/console/signin", url.Values{"token": {c.token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in through nginx: %d", resp.StatusCode)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	dial := func(q string) *websocket.Conn {
		t.Helper()
		ws, resp, err := websocket.Dial(ctx, c.URL+"/console/terminal/"+m.id+"/ws"+q,
			&websocket.DialOptions{HTTPClient: &http.Client{Jar: jar, Transport: tr}})
		if err != nil {
			t.Fatalf("terminal websocket through nginx: %v (%v)", err, resp)
		}
		t.Cleanup(func() { ws.CloseNow() })
		return ws
	}
	// read reads until the output holds want, returning the process id
	// from "started" if one came.
	read := func(ws *websocket.Conn, want string) string {
		t.Helper()
		var out bytes.Buffer
		id := ""
		for !strings.Contains(out.String(), want) {
			typ, data, err := ws.Read(ctx)
			if err != nil {
				t.Fatalf("waiting for %q: %v; output %q", want, err, out.String())
			}
			if typ == websocket.MessageBinary {
				out.Write(data[8:])
				continue
			}
			var msg struct{ T, ID, Text string }
			_ = json.Unmarshal(data, &msg)
			if msg.T == "started" {
				id = msg.ID
			}
			if msg.T == "error" {
				t.Fatalf("terminal error: %s", msg.Text)
			}
		}
		return id
	}
	one := dial("")
	if err := one.Write(ctx, websocket.MessageBinary, []byte("echo via-$((40+2))\r")); err != nil {
		t.Fatal(err)
	}
	id := read(one, "via-42")
	if id == "" {
		t.Fatal("no started message")
	}
	two := dial("?p=" + id)
	read(two, "via-42") // the replay
	if err := one.Write(ctx, websocket.MessageBinary, []byte("echo both-$((1+1))\r")); err != nil {
		t.Fatal(err)
	}
	read(two, "both-2")

	// nginx logs a websocket when it ends. Round robin puts the two on
	// two replicas unless other requests came between (then this says so).
	one.Close(websocket.StatusNormalClosure, "")
	two.Close(websocket.StatusNormalClosure, "")
	var ups map[string]bool
	waitFor(t, 20*time.Second, "the two terminal websockets in nginx's log", func() bool {
		log, err := os.ReadFile(filepath.Join(c.dir, "nginx", "access.log"))
		if err != nil {
			return false
		}
		ups = map[string]bool{}
		n := 0
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(line, "/console/terminal/") && strings.Contains(line, " 101 ") {
				_, up, _ := strings.Cut(line, "upstream=")
				ups[up] = true
				n++
			}
		}
		return n == 2
	})
	t.Logf("terminal websockets served by %d replica(s) %v; the machine's tunnel is on %s", len(ups), ups, c.holder(t).addr)
}
