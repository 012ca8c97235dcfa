package replica_test

import (
	"io"
	"net"
	"sync"
	"testing"
)

// rrBalancer is a round-robin TCP load balancer for tests and benchmarks:
// each new connection goes to the next backend that accepts it (a backend
// that refuses, such as a killed replica's port, is skipped), as an
// ordinary load balancer with health checks would.
type rrBalancer struct {
	lis net.Listener
	wg  sync.WaitGroup

	mu       sync.Mutex
	backends []string
	next     int
	conns    map[net.Conn]struct{} // client sides of the connections relayed now
}

func newRRBalancer(tb testing.TB, backends ...string) *rrBalancer {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	lb := &rrBalancer{lis: lis, backends: backends, conns: map[net.Conn]struct{}{}}
	lb.wg.Add(1)
	go lb.serve()
	tb.Cleanup(func() {
		lis.Close()
		lb.cut()
		lb.wg.Wait()
	})
	return lb
}

// URL is the balancer's address as a hub URL.
func (lb *rrBalancer) URL() string { return "http://" + lb.lis.Addr().String() }

// use replaces the backends new connections go to.
func (lb *rrBalancer) use(backends ...string) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	lb.backends = backends
}

// cut closes every connection it relays now (their backends stay up).
func (lb *rrBalancer) cut() {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	for c := range lb.conns {
		c.Close()
	}
}

// dial connects to the next backend that accepts, trying each once.
func (lb *rrBalancer) dial() (net.Conn, error) {
	lb.mu.Lock()
	backends := lb.backends
	start := lb.next
	lb.next++
	lb.mu.Unlock()
	var err error = io.ErrUnexpectedEOF
	for i := range backends {
		var u net.Conn
		if u, err = net.Dial("tcp", backends[(start+i)%len(backends)]); err == nil {
			return u, nil
		}
	}
	return nil, err
}

func (lb *rrBalancer) serve() {
	defer lb.wg.Done()
	for {
		c, err := lb.lis.Accept()
		if err != nil {
			return
		}
		lb.wg.Add(1)
		go func() {
			defer lb.wg.Done()
			lb.relay(c)
		}()
	}
}

// relay copies between c and a backend until either side ends.
func (lb *rrBalancer) relay(c net.Conn) {
	defer c.Close()
	u, err := lb.dial()
	if err != nil {
		return
	}
	defer u.Close()
	lb.mu.Lock()
	lb.conns[c] = struct{}{}
	lb.mu.Unlock()
	defer func() {
		lb.mu.Lock()
		delete(lb.conns, c)
		lb.mu.Unlock()
	}()
	done := make(chan struct{}, 2)
	go func() { io.Copy(u, c); done <- struct{}{} }()
	go func() { io.Copy(c, u); done <- struct{}{} }()
	<-done // either side ended: end both
	c.Close()
	u.Close()
	<-done
}
