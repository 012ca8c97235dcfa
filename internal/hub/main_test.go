package hub

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: every
// one the code starts must end when its owner is closed.
//
// With a cluster (AGENTD_KUBECONFIG: the tests on the Kubernetes driver),
// client-go's own goroutines are let be: its transport cache keeps, for the
// process's life, a worker that reloads a kubeconfig's client certificate
// files and the HTTP/2 connection to the API server, and nothing in
// client-go stops them.
func TestMain(m *testing.M) {
	var opts []goleak.Option
	if os.Getenv("AGENTD_KUBECONFIG") != "" {
		opts = append(opts,
			goleak.IgnoreAnyFunction("k8s.io/client-go/transport.(*dynamicClientCert).run"),
			goleak.IgnoreAnyFunction("k8s.io/client-go/transport.(*dynamicClientCert).processNextWorkItem"),
			goleak.IgnoreAnyFunction("k8s.io/client-go/util/workqueue.(*delayingType[...]).waitingLoop"),
			goleak.IgnoreAnyFunction("k8s.io/apimachinery/pkg/util/wait.PollImmediateUntil"),
			goleak.IgnoreAnyFunction("k8s.io/apimachinery/pkg/util/wait.PollImmediateUntilWithContext.poller.func1.1"),
			goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
		)
	}
	goleak.VerifyTestMain(m, opts...)
}
