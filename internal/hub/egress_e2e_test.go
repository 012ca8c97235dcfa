package hub_test

import (
	"context"
	"errors"
	"fmt"
	"google.golang.org/grpc/metadata"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/agentimage"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
)

// An agent's sandbox with an allow list, on a real hub and the real Docker
// engine: curl in the sandbox reaches the allowed hosts (https through
// CONNECT, plain http) through the proxy agentd serves and the hub's end of
// it, which maps the names to servers on loopback that the test started;
// another host is refused with the 403 naming the allow list, and recorded;
// a connection that skips the proxy goes nowhere (the container has no
// network). Under each isolation: the profile asks for it.
func TestAgentEgressAllowList(t *testing.T) {
	for _, iso := range sandboxtest.Isolations {
		t.Run(iso, func(t *testing.T) {
			sandboxtest.RequireIsolation(t, iso)
			agentEgressAllowList(t, iso)
		})
	}
}

func agentEgressAllowList(t *testing.T, iso string) {
	base := sandboxtest.BaseImage(t) // it has curl
	runner := "agentd/runner-managed:egressfixture-latest"
	if out, err := exec.Command("docker", "tag", base, runner).CombinedOutput(); err != nil {
		t.Fatalf("docker tag: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", runner).Run() })
	runnerID, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", runner).Output()
	if err != nil {
		t.Fatal(err)
	}

	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "api says hi to %s at %s\n", r.Host, r.URL.Path)
	}))
	defer tlsSrv.Close()
	plainSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "plain %s %s\n", r.Host, r.URL.RequestURI())
	}))
	defer plainSrv.Close()
	var dials atomic.Int64
	names := map[string]string{
		"api.example.com:443":    tlsSrv.Listener.Addr().String(),
		"plain.example.com:80":   plainSrv.Listener.Addr().String(),
		"extra.example.com:8443": tlsSrv.Listener.Addr().String(), // allowed by --allow only
	}
	dial := func(ctx context.Context, host string, port int) (net.Conn, error) {
		dials.Add(1)
		addr, ok := names[fmt.Sprintf("%s:%d", host, port)]
		if !ok {
			return nil, errors.New("the test knows no such host") // never a real address
		}
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
	profile := `{"name": %q, "slug": %q, "display_name": "Egress fixture", "executable": "sh", "strategy": "builder",
	  "install": {"script": ["true"]}, "limits": {"cpus": 0.5, "memory_mib": 256, "pids": 128},
	  "network": {"default": "allow", "allow": ["api.example.com", "plain.example.com:80"]}, "ttl": "1h", "sensitivity": "low",
	  "risk_notes": ["A test fixture."], "isolation": "` + iso + `"}`
	h := startSandboxHubWith(t, func(o *sandboxes.Options) {
		o.EgressDial = dial
		o.Agents = []agentimage.Profile{agentProfile(t, "egressfixture", profile)}
	}, hubtest.Options{})
	run := h.agentctl()

	code, out, errs := run("agent", "run", "egressfixture", "--ttl", "10m")
	id := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(id, "sb-") {
		t.Fatalf("agent run = %d %q %q", code, out, errs)
	}
	if !strings.Contains(errs, "note: the sandbox reaches only api.example.com:443, plain.example.com:80, through the hub's egress proxy") {
		t.Errorf("no notice of the allow list: %q", errs)
	}
	h.checkKernel(t, metadata.NewOutgoingContext(t.Context(), metadata.Pairs("authorization", "Bearer "+h.Token, "agentd-machine", id)), iso)
	sh := func(script string) (int, string, string) { return run("--machine", id, "sh", script) }

	// What the agent's commands see: the proxy, and no network but lo
	// (from /proc/net/dev: gVisor has no /sys/class/net).
	if code, out, _ := sh(`echo "$HTTPS_PROXY $https_proxy $HTTP_PROXY $ALL_PROXY $NO_PROXY"; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '`); code != 0 ||
		out != "http://127.0.0.1:3128 http://127.0.0.1:3128 http://127.0.0.1:3128 http://127.0.0.1:3128 localhost,127.0.0.1,::1\nlo\n" {
		t.Errorf("the sandbox's proxy variables and interfaces: %d %q", code, out)
	}

	// Allowed: https through CONNECT, plain http through the proxy.
	for _, tc := range []struct{ script, want string }{
		{"curl -sS -k https://api.example.com/v1/models", "api says hi to api.example.com at /v1/models\n"},
		{"curl -sS http://plain.example.com/a?b=1", "plain plain.example.com /a?b=1\n"},
	} {
		if code, out, errs := sh(tc.script); code != 0 || out != tc.want {
			t.Errorf("%s = %d %q %q; want %q", tc.script, code, out, errs, tc.want)
		}
	}

	// Refused: another host, or an allowed host on another port; the hub
	// dials nothing for them.
	before := dials.Load()
	const list = "(api.example.com:443, plain.example.com:80)"
	const hint = "; an admin adds destinations with 'agentctl sandbox allow SANDBOX HOST[:PORT]', a run with 'agentctl agent run PROFILE --allow HOST[:PORT]'\n"
	for _, tc := range []struct{ script, want string }{
		{"curl -sS http://evil.example.com/", "agentd egress proxy: evil.example.com:80 is not on this sandbox's allow list " + list + hint},
		{"curl -sS http://api.example.com/", "agentd egress proxy: api.example.com:80 is not on this sandbox's allow list " + list + hint},
		{"curl -sS -k -w '%{http_connect}' -o /dev/null https://evil.example.com/; echo \" exit=$?\"", "403 exit=56\n"},
		{"curl -sS -k -w '%{http_connect}' -o /dev/null https://extra.example.com:8443/; echo \" exit=$?\"", "403 exit=56\n"},
	} {
		if code, out, errs := sh(tc.script); code != 0 || out != tc.want {
			t.Errorf("%s = %d %q %q; want %q", tc.script, code, out, errs, tc.want)
		}
	}
	if n := dials.Load() - before; n != 0 {
		t.Errorf("the hub dialled %d times for refused destinations", n)
	}

	// Around the proxy: no route, no name resolution.
	for _, script := range []string{
		"curl -sS --noproxy '*' -k --max-time 5 https://api.example.com/",
		"curl -sS --noproxy '*' --max-time 5 http://" + tlsSrv.Listener.Addr().String() + "/",
	} {
		if code, out, _ := sh(script); code == 0 {
			t.Errorf("%s = 0 %q; want a failure (no network)", script, out)
		}
	}
	if gw := bridgeGateway(t); gw != "" {
		lis, err := net.Listen("tcp", net.JoinHostPort(gw, "0"))
		if err != nil {
			t.Fatal(err)
		}
		defer lis.Close()
		accepted := make(chan struct{}, 1)
		go func() {
			if c, err := lis.Accept(); err == nil {
				accepted <- struct{}{}
				c.Close()
			}
		}()
		script := "curl -sS --noproxy '*' --max-time 5 http://" + lis.Addr().String() + "/; echo \" exit=$?\""
		if code, out, _ := sh(script); code != 0 || !strings.HasSuffix(out, " exit=7\n") {
			t.Errorf("%s = %d %q; want curl's exit 7 (could not connect)", script, code, out)
		}
		select {
		case <-accepted:
			t.Errorf("the sandbox reached the host's bridge address %s directly", gw)
		default:
		}
	}

	// The org's activity has each allowed and each refused destination.
	code, out, _ = run("activity", "--tail", "200")
	for _, want := range []string{
		"egress to api.example.com:443 from " + id,
		"egress to plain.example.com:80 from " + id,
		"refused egress to evil.example.com:80 from " + id + ": evil.example.com:80 is not on this sandbox's allow list " + list,
		"refused egress to evil.example.com:443 from " + id,
		"ran agent egressfixture in " + id + " (image " + runner + ", id " + strings.TrimSpace(string(runnerID)) + ", network allow api.example.com:443 plain.example.com:80, ttl 10m0s)",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("activity lacks %q:\n%s", want, out)
		}
	}
	if code, out, _ := run("--json", "activity", "--tail", "200"); code != 0 || !strings.Contains(out, `"kind":"egress.deny"`) || !strings.Contains(out, `"kind":"egress.allow"`) {
		t.Errorf("activity --json lacks the egress kinds:\n%s", out)
	}

	// --allow adds destinations for one run (here through the exec path of
	// a run with arguments); refused with --network open, or when it is no
	// allow-list entry, and then nothing is made.
	code, out, errs = run("agent", "run", "egressfixture", "--allow", "extra.example.com:8443", "--",
		"-c", "curl -sS -k https://extra.example.com:8443/x && curl -sS http://evil.example.com/")
	if want := "api says hi to extra.example.com:8443 at /x\nagentd egress proxy: evil.example.com:80 is not on this sandbox's allow list (api.example.com:443, plain.example.com:80, extra.example.com:8443)" + hint; code != 0 || out != want {
		t.Errorf("agent run --allow = %d %q %q; want %q", code, out, errs, want)
	}
	before2, _ := h.Store.ListSandboxes(t.Context(), "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--allow", "https://x.example.com"}, `--allow: invalid allow-list entry "https://x.example.com": want a host name (api.example.com), not a URL`},
		{[]string{"--allow", "10.0.0.1"}, "not an IP address"},
		{[]string{"--allow", "x.example.com", "--network", "open"}, "--allow adds to the restricted network; with --network open"},
	} {
		code, out, errs := run(append([]string{"agent", "run", "egressfixture"}, tc.args...)...)
		if code != 1 || out != "" || !strings.Contains(errs, tc.want) {
			t.Errorf("agent run %v = %d %q %q; want 1 and %q", tc.args, code, out, errs, tc.want)
		}
	}
	if after, _ := h.Store.ListSandboxes(t.Context(), ""); len(after) != len(before2) {
		t.Errorf("refused runs left sandboxes: %d before, %d after", len(before2), len(after))
	}

	// A hub restart: the sandbox's allow list is read back from its
	// container, and the proxy works as before.
	h.Stop()
	h.Serve(h.Addr)
	pollUntil(t, 30*time.Second, "the sandbox back on the restarted hub", func() (bool, string) {
		code, out, errs := sh("true")
		return code == 0, out + errs
	})
	if code, out, errs := sh("curl -sS -k https://api.example.com/again"); code != 0 || out != "api says hi to api.example.com at /again\n" {
		t.Errorf("after a hub restart: %d %q %q", code, out, errs)
	}
	if code, out, _ := sh("curl -sS http://evil.example.com/"); code != 0 || !strings.Contains(out, "not on this sandbox's allow list "+list) {
		t.Errorf("after a hub restart, refused: %d %q", code, out)
	}
}

// bridgeGateway is the host's address on Docker's default bridge (a host
// address a sandbox on a network would reach), or "" when there is none.
func bridgeGateway(t *testing.T) string {
	out, err := exec.Command("docker", "network", "inspect", "bridge", "-f", "{{range .IPAM.Config}}{{.Gateway}}{{end}}").Output()
	if err != nil {
		t.Logf("no default bridge: %v", err)
		return ""
	}
	return strings.TrimSpace(string(out))
}
