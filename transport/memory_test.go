package transport_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/transport"
)

const helperEnv = "AGENTD_TRANSPORT_TEST_DAEMONS" // "<hub URL> <count>"

func testMachineID(i int) string { return fmt.Sprintf("m-%d", i) }

func testMachineKey(i int) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("agentd transport test machine " + strconv.Itoa(i)))
	return ed25519.NewKeyFromSeed(seed[:])
}

type mem struct{ heap, stack, goroutines int64 }

// memUse is the heap and stacks in use after a collection, and the
// goroutine count.
func memUse() mem {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return mem{int64(ms.HeapInuse), int64(ms.StackInuse), int64(runtime.NumGoroutine())}
}

// per describes the growth from m to after, per tunnel.
func (m mem) per(after mem, n int) (total float64, desc string) {
	kib := func(b int64) float64 { return float64(b) / float64(n) / 1024 }
	total = kib(after.heap - m.heap + after.stack - m.stack)
	return total, fmt.Sprintf("%.1f KiB per tunnel (heap %.1f KiB, stacks %.1f KiB), %.1f goroutines",
		total, kib(after.heap-m.heap), kib(after.stack-m.stack), float64(after.goroutines-m.goroutines)/float64(n))
}

// What an idle tunnel costs the hub. The daemons run in a child process
// (this test binary, TestHelperDaemons), so only the hub's side is counted
// here; the child reports the daemons' side.
func TestIdleTunnelMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 200 tunnels")
	}
	const n = 200
	h := startHub(t, hubConfig{})
	for i := range n {
		h.addMachine(testMachineID(i), testMachineKey(i).Public().(ed25519.PublicKey), "acme")
	}
	base := memUse()

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperDaemons$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"="+h.url()+" "+strconv.Itoa(n))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	daemonLine := make(chan string, 1)
	var output bytes.Buffer
	var readers sync.WaitGroup
	readers.Go(func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			output.WriteString(line + "\n")
			if strings.HasPrefix(line, "DAEMON-MEM ") {
				daemonLine <- line
			}
		}
	})
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		stdin.Close() // the child stops its daemons and exits
		readers.Wait()
		if err := cmd.Wait(); err != nil {
			t.Errorf("daemons process: %v\n%s%s", err, output.String(), stderr.String())
		}
	}
	defer stop()

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	for range n {
		select {
		case <-h.ups:
		case <-ctx.Done():
			t.Fatalf("only %d of %d tunnels came up", h.reg.Len(), n)
		}
	}
	for i := range n {
		// A call through each: its transport is up.
		if err := h.health(ctx, testMachineID(i)); err != nil {
			t.Fatalf("%s: %v", testMachineID(i), err)
		}
	}
	var line string
	select {
	case line = <-daemonLine:
	case <-ctx.Done():
		t.Fatal("the daemons never reported")
	}
	perTunnel, desc := base.per(memUse(), n)
	t.Logf("hub, %d idle tunnels: %s (target ≤ 64 KiB)", n, desc)
	if d, ok := strings.CutPrefix(line, "DAEMON-MEM "); ok {
		t.Logf("daemons, %d tunnels on one gRPC server: %s", n, d)
	}
	if perTunnel > 1024 {
		t.Errorf("%.0f KiB per idle tunnel on the hub: something is very wrong", perTunnel)
	}
	stop()
}

// TestHelperDaemons is not a test on its own: TestIdleTunnelMemory runs the
// test binary with it to keep the daemons in another process.
func TestHelperDaemons(t *testing.T) {
	spec := os.Getenv(helperEnv)
	if spec == "" {
		t.Skip("the daemons' process of TestIdleTunnelMemory")
	}
	hubURL, count, _ := strings.Cut(spec, " ")
	n, err := strconv.Atoi(count)
	if err != nil {
		t.Fatal(err)
	}
	base := memUse()
	srv, _ := newDaemonServer()
	var serving sync.WaitGroup
	tuns := make([]*transport.Tunnel, n)
	for i := range n {
		o := daemonOptions(t, hubURL, testMachineID(i), testMachineKey(i))
		o.Backoff.Initial, o.Backoff.Max = 100*time.Millisecond, time.Second
		tun, err := transport.Listen(o)
		if err != nil {
			t.Fatal(err)
		}
		tuns[i] = tun
		serving.Go(func() { srv.Serve(tun) })
	}
	for _, tun := range tuns {
		waitStatus(t, tun, "connected", isConnected)
	}
	_, desc := base.per(memUse(), n)
	fmt.Printf("DAEMON-MEM %s\n", desc)
	io.Copy(io.Discard, os.Stdin) // until the parent is done
	srv.Stop()
	serving.Wait()
}
