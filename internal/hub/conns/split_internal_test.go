package conns

import (
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"

	"go.uber.org/zap/zaptest"
)

// failingListener fails its first n Accepts with err, then accepts.
type failingListener struct {
	net.Listener
	mu  sync.Mutex
	n   int
	err error
}

func (l *failingListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if l.n > 0 {
		l.n--
		l.mu.Unlock()
		return nil, l.err
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

// Out of file descriptors (the process's or the system's), or a
// connection aborted before it was accepted: the splitter backs off and
// accepts again (before: only timeouts did, and agenthub serve exited with
// "accept4: too many open files").
func TestSplitterSurvivesAcceptErrors(t *testing.T) {
	t.Parallel()
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ECONNABORTED} {
		t.Run(errno.Error(), func(t *testing.T) {
			t.Parallel()
			inner, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			lis := &failingListener{Listener: inner, n: 5,
				err: &net.OpError{Op: "accept", Net: "tcp", Addr: inner.Addr(), Err: os.NewSyscallError("accept4", errno)}}
			sp := NewSplitter(lis, nil, zaptest.NewLogger(t))
			done := make(chan error, 1)
			go func() { done <- sp.Run() }()
			defer func() {
				sp.Close()
				sp.Wait()
				if err := <-done; err != nil {
					t.Errorf("run after Close = %v, want nil", err)
				}
			}()
			c, err := net.Dial("tcp", inner.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write([]byte("GET / HTTP/1.1\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			got := make(chan net.Conn, 1)
			go func() {
				c, err := sp.HTTP().Accept()
				if err == nil {
					got <- c
				}
				close(got)
			}()
			select {
			case hc, ok := <-got:
				if !ok {
					t.Fatal("the HTTP side's Accept failed")
				}
				hc.Close()
			case err := <-done:
				done <- err // for the deferred check
				t.Fatalf("the splitter stopped on %v: %v", errno, err)
			}
			if !errors.Is(lis.err, errno) {
				t.Fatalf("the injected error is not %v", errno)
			}
		})
	}
}
