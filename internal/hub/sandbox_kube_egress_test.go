package hub_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devdepot-ai/agentd/internal/ctl"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/sandbox/kube"
	"github.com/devdepot-ai/agentd/internal/sandbox/kube/kubetest"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
)

// An environment with an allow list on Kubernetes, with Pods that dial the
// hub over the cluster network (the init container's agentd, the hub's
// TLS listener on the node's bridge address): the sandbox's commands reach
// an allowed host through agentd's egress proxy, which carries each
// CONNECT over TLS to the hub's sandbox listener, where the hub checks
// the sandbox's list (plain http and https through CONNECT); a host not on
// the list gets the hub's 403 and is never dialled; and the Pod reaches
// nothing but the hub's listener (another port on the same address, the
// test's own server, does not answer: the NetworkPolicies deny-all and
// agentd-sandbox-tunnel). The hub's dialer maps the allowed names to
// servers on loopback. Skips without a cluster (make k8s-up).
func TestKubeSandboxEgressAllowList(t *testing.T) {
	k := startKube(t) // skips without a cluster
	admin, _ := kubetest.Admin(t)
	// The node's address on make k8s-up's bridge, which the Pods reach.
	lis, err := net.Listen("tcp", "10.213.0.1:0")
	if err != nil {
		t.Skipf("cannot listen on the cluster bridge's address 10.213.0.1 (make k8s-up makes it): %v", err)
	}
	drv, err := kube.New(kube.Options{Kubeconfig: admin, Namespace: k.ns, HostPathDir: filepath.Join(k.dir, "ws"),
		AgentdImage: sandboxtest.KubeAgentdImage(t, admin), HubAdvertise: lis.Addr().String(),
		StartTimeout: 8 * time.Minute, Logger: zaptest.NewLogger(t).Named("kube")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() }) // after the hub's own cleanup

	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s\n", r.Host)
	}))
	defer plain.Close()
	secure := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "secure hello from %s\n", r.Host)
	}))
	defer secure.Close()
	names := map[string]string{
		"a.example.com:80":  plain.Listener.Addr().String(),
		"s.example.com:443": secure.Listener.Addr().String(),
		"b.example.com:80":  plain.Listener.Addr().String(), // not on the list: never dialled
	}
	var dials atomic.Int64
	dial := func(ctx context.Context, host string, port int) (net.Conn, error) {
		dials.Add(1)
		addr, ok := names[fmt.Sprintf("%s:%d", host, port)]
		if !ok {
			return nil, errors.New("the test knows no such host") // never a real address
		}
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
	// What the Pod must not reach around the proxy: a server of the test
	// on the hub's address, another port.
	var around atomic.Int64
	aside, err := net.Listen("tcp", "10.213.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	asideSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		around.Add(1)
		fmt.Fprintln(w, "reached around the proxy")
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = asideSrv.Serve(aside) }()
	defer asideSrv.Close()

	o := k.options(sandboxtest.AgentdBinary(t))
	o.Driver, o.TunnelListener, o.TunnelDial = drv, lis, true
	o.StartTimeout = 8 * time.Minute // Pods start in minutes on the shared cluster
	o.EgressDial = dial
	h := hubtest.Start(t, hubtest.Options{Sandboxes: o})
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(h.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
		defer cancel()
		code := ctl.Main(ctx, append([]string{"--hub", h.URL, "--token-file", tf}, args...),
			ctl.IO{In: strings.NewReader(""), Out: &out, Err: &errb})
		return code, out.String(), errb.String()
	}
	if code, out, errs := run("env", "set", "builtin", "--allow", "a.example.com:80,s.example.com"); code != 0 {
		t.Fatalf("env set builtin --allow = %d %q %q", code, out, errs)
	}
	sh := func(script string) (int, string, string) {
		return run("--env", "builtin", "--conversation", "c-egress", "sh", script)
	}

	start := time.Now()
	code, out, errs := sh("curl -sS http://a.example.com/x")
	t.Logf("first call (the Pod's start) and a plain http request through the hub: %s", time.Since(start).Round(time.Second))
	if code != 0 || out != "hello from a.example.com\n" {
		t.Fatalf("curl http://a.example.com/x (allowed) = %d %q %q", code, out, errs)
	}
	if code, out, errs := sh("curl -sS -k https://s.example.com/y"); code != 0 || out != "secure hello from s.example.com\n" {
		t.Errorf("curl https://s.example.com/y (allowed, CONNECT) = %d %q %q", code, out, errs)
	}
	before := dials.Load()
	const refusedB = "agentd egress proxy: b.example.com:80 is not on this sandbox's allow list (a.example.com:80, s.example.com:443)"
	if code, out, errs := sh("curl -sS http://b.example.com/x"); code != 0 || !strings.HasPrefix(out, refusedB) {
		t.Errorf("curl http://b.example.com/x (not on the list) = %d %q %q; want %q…", code, out, errs, refusedB)
	}
	if code, out, errs := sh("curl -sS -k -w '%{http_connect}' -o /dev/null https://b.example.com/; echo \" exit=$?\""); code != 0 || out != "403 exit=56\n" {
		t.Errorf("curl https://b.example.com (not on the list) = %d %q %q; want the hub's 403 to the CONNECT", code, out, errs)
	}
	if n := dials.Load() - before; n != 0 {
		t.Errorf("the hub dialled %d times for refused destinations", n)
	}
	// Around the proxy: only the hub's listener is reachable.
	script := "curl -sS --noproxy '*' --max-time 5 http://" + aside.Addr().String() + "/"
	code, out, errs = sh(script + `; echo "exit=$?"`)
	t.Logf("around the proxy: %s: %q %q", script, out, errs)
	if code != 0 || strings.HasSuffix(out, "exit=0\n") || around.Load() != 0 {
		t.Errorf("%s = %d %q %q (%d requests served); want no connection (the Pod's egress is the hub's listener only)", script, code, out, errs, around.Load())
	}
	// The Pod is the init container's: its tunnel and its egress go over
	// the network, no hostPath socket.
	pods, err := k.cs.CoreV1().Pods(k.ns).List(t.Context(), metav1.ListOptions{LabelSelector: "agentd.devdepot.ai/tunnel=1"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("the namespace's tunnel Pods: %d %v; want the sandbox's", len(pods.Items), err)
	}
	for _, p := range pods.Items {
		for _, v := range p.Spec.Volumes {
			if v.HostPath != nil {
				t.Errorf("pod %s: volume %s is a hostPath (%s)", p.Name, v.Name, v.HostPath.Path)
			}
		}
	}
}
