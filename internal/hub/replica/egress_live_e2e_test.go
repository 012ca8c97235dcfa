package replica_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// A sandbox's allow list changed through replica B holds for its next
// connection through its proxy on replica A at once, and B's --cut closes
// the connection A holds open within a second (A's recheck), with no
// message between the replicas: the store's generation is the only channel.
func TestSandboxEgressChangedOnAnotherReplica(t *testing.T) {
	streaming := make(chan struct{}, 1)
	ended := make(chan time.Time, 1)
	quit := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/stream" {
			fmt.Fprintf(w, "hello from %s\n", r.Host)
			return
		}
		streaming <- struct{}{}
		for {
			if _, err := fmt.Fprintln(w, "tick"); err != nil {
				break
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-quit:
				return
			case <-time.After(50 * time.Millisecond):
				continue
			}
			break
		}
		select {
		case ended <- time.Now():
		default:
		}
	}))
	defer srv.Close()
	defer close(quit)
	dial := func(ctx context.Context, host string, port int) (net.Conn, error) {
		if host == "a.example.com" && port == 80 {
			return (&net.Dialer{}).DialContext(ctx, "tcp", srv.Listener.Addr().String())
		}
		return nil, errors.New("the test knows no such host")
	}
	a, b := sandboxReplicas(t, func(_ int, o *sandboxes.Options) { o.EgressDial = dial })

	if _, err := a.envs().SetEnvironmentAllow(a.admin(), &hubv1.SetEnvironmentAllowRequest{Name: "builtin", Allow: []string{"a.example.com:80"}}); err != nil {
		t.Fatal(err)
	}
	out, id := a.mustSh("c1", "curl -sS http://a.example.com/x")
	if out != "hello from a.example.com\n" {
		t.Fatalf("curl a through A = %q", out)
	}
	a.mustSh("c1", "setsid sh -c 'curl -sSN http://a.example.com/stream >/dev/null 2>&1' </dev/null >/dev/null 2>&1 &")
	select {
	case <-streaming:
	case <-time.After(30 * time.Second):
		t.Fatal("the download did not start")
	}

	// Through B, without --cut: the next connection through A is refused,
	// the open one stays.
	resp, err := b.envs().ChangeSandboxEgress(b.admin(), &hubv1.ChangeSandboxEgressRequest{Id: id, Deny: []string{"a.example.com"}})
	if err != nil || resp.GetEgress().GetGeneration() != 2 || len(resp.GetEgress().GetAllow()) != 0 {
		t.Fatalf("deny through B = %v, %v", resp, err)
	}
	if out, _ := a.mustSh("c1", "curl -sS http://a.example.com/x"); !strings.HasPrefix(out, "agentd egress proxy: a.example.com:80 is not on this sandbox's allow list") {
		t.Errorf("curl a after B's deny = %q; want the proxy's refusal", out)
	}
	select {
	case <-ended:
		t.Fatal("a deny without --cut ended the open download")
	case <-time.After(1500 * time.Millisecond): // three of A's rechecks
	}

	// Through B, --cut: B holds no tunnel of it (closed 0); A closes its
	// own within a second.
	start := time.Now()
	resp, err = b.envs().ChangeSandboxEgress(b.admin(), &hubv1.ChangeSandboxEgressRequest{Id: id, Deny: []string{"a.example.com"}, Cut: true})
	if err != nil || resp.GetEgress().GetGeneration() != 3 || resp.GetEgress().GetCutGeneration() != 3 || resp.GetClosed() != 0 {
		t.Fatalf("deny --cut through B = %v, %v", resp, err)
	}
	select {
	case at := <-ended:
		if d := at.Sub(start); d > time.Second {
			t.Errorf("the download ended %v after B's cut; want within 1 s", d)
		}
	case <-time.After(10 * time.Second):
		t.Error("B's cut left the download through A open")
	}
}
