package agentd

// Benchmarks of the daemon over its real unix socket, driven by an
// in-process gRPC client: the figures `make bench` (scripts/bench.sh)
// reports as "Go client" next to the agentctl, ssh, pipe, cat and grep
// baselines. Recorded results and their reading: docs/performance.md.
//
//	go test -run '^$' -bench . -benchtime 2s ./agentd/

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/devdepot-ai/agentd/internal/wire"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

const (
	benchFileSize  = 256 << 20      // Write256MB, Read256MB, Stdout
	benchChunkSize = wire.ChunkSize // what agentctl write sends per message

	// The search tree: searchDirs × searchFilesPerDir small text files, of
	// which searchNeedleFiles contain searchNeedle once. scripts/bench.sh
	// builds the same shape for agentctl grep and grep -r.
	searchDirs        = 100
	searchFilesPerDir = 200
	searchNeedleFiles = 5
	searchNeedle      = "zebra_quokka_42"
)

// newBenchServer is newTestServer for benchmarks: testing.TB, and a no-op
// logger so that logging is not part of what is measured.
func newBenchServer(tb testing.TB) *testServer {
	tb.Helper()
	dir := tb.TempDir()
	opts := Options{
		Workspace: filepath.Join(dir, "ws"),
		StateDir:  filepath.Join(dir, "state"),
		Env:       os.Environ(),
		Logger:    zap.NewNop(),
	}
	if err := os.Mkdir(opts.Workspace, 0o755); err != nil {
		tb.Fatal(err)
	}
	srv, err := New(tb.Context(), opts)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	sock := filepath.Join(dir, "agentd.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithReadBufferSize(256<<10), grpc.WithWriteBufferSize(256<<10))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		conn.Close()
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Serve: %v", err)
		}
	})
	return &testServer{Server: srv, Socket: sock, Conn: conn}
}

// runToExit starts req and consumes its events until Exited. It returns
// the stdout bytes received and the exit event.
func runToExit(ctx context.Context, c agentdv1.ProcessServiceClient, req *agentdv1.StartRequest) (int64, *agentdv1.Exited, error) {
	st, err := c.Start(ctx, req)
	if err != nil {
		return 0, nil, err
	}
	var n int64
	for {
		resp, err := st.Recv()
		if err != nil {
			if err == io.EOF {
				err = errors.New("stream ended without an exited event")
			}
			return n, nil, err
		}
		ev := resp.GetEvent()
		if o := ev.GetOutput(); o != nil && o.GetStream() == agentdv1.OutputStream_OUTPUT_STREAM_STDOUT {
			if o.GetOffset() != n {
				return n, nil, fmt.Errorf("output at offset %d, want %d", o.GetOffset(), n)
			}
			n += int64(len(o.GetData()))
		}
		if x := ev.GetExited(); x != nil {
			return n, x, nil
		}
	}
}

// reportLatency reports the p50 and p99 of ds in milliseconds.
func reportLatency(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	pct := func(p float64) float64 {
		i := int(p * float64(len(ds)-1))
		return float64(ds[i]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

// BenchmarkExecTrue is the round trip of a trivial command: Start ["true"]
// until its Exited event, over an established connection.
func BenchmarkExecTrue(b *testing.B) {
	ts := newBenchServer(b)
	c := agentdv1.NewProcessServiceClient(ts.Conn)
	ctx := b.Context()
	req := &agentdv1.StartRequest{Argv: []string{"true"}}
	// Warm up: the connection, the server's goroutines, the page cache.
	for range 5 {
		if _, x, err := runToExit(ctx, c, req); err != nil {
			b.Fatal(err)
		} else if x.GetExitCode() != 0 {
			b.Fatalf("true exited %d", x.GetExitCode())
		}
	}
	var ds []time.Duration
	for b.Loop() {
		t0 := time.Now()
		_, x, err := runToExit(ctx, c, req)
		ds = append(ds, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
		if x.GetExitCode() != 0 {
			b.Fatalf("true exited %d", x.GetExitCode())
		}
	}
	reportLatency(b, ds)
}

// BenchmarkOSExecTrue is the floor under BenchmarkExecTrue: the same
// command run with os/exec in the benchmark process, no agentd in between.
func BenchmarkOSExecTrue(b *testing.B) {
	var ds []time.Duration
	for b.Loop() {
		t0 := time.Now()
		err := exec.CommandContext(b.Context(), "true").Run()
		ds = append(ds, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
	}
	reportLatency(b, ds)
}

// BenchmarkStdout streams 256 MiB of a command's stdout to the client.
func BenchmarkStdout(b *testing.B) {
	ts := newBenchServer(b)
	c := agentdv1.NewProcessServiceClient(ts.Conn)
	ctx := b.Context()
	req := &agentdv1.StartRequest{Argv: []string{"head", "-c", fmt.Sprint(benchFileSize), "/dev/zero"}}
	run := func() {
		n, x, err := runToExit(ctx, c, req)
		if err != nil {
			b.Fatal(err)
		}
		if x.GetExitCode() != 0 || n != benchFileSize {
			b.Fatalf("head exited %d after %d bytes of stdout, want 0 after %d", x.GetExitCode(), n, benchFileSize)
		}
	}
	run() // warm up: a daemon that has run something before, as in use
	b.SetBytes(benchFileSize)
	for b.Loop() {
		run()
	}
}

// benchContent is benchFileSize bytes that nothing on the way can
// compress: a 1 MiB pseudo-random block, repeated.
func benchContent() []byte {
	block := make([]byte, 1<<20)
	x := uint64(0x9E3779B97F4A7C15) // xorshift64
	for i := range block {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		block[i] = byte(x >> 32)
	}
	return bytes.Repeat(block, benchFileSize/len(block))
}

// writeFile sends data to path with FileService.Write in chunks of
// benchChunkSize, as agentctl write does.
func writeFile(ctx context.Context, c agentdv1.FileServiceClient, path string, data []byte) error {
	st, err := c.Write(ctx)
	if err != nil {
		return err
	}
	hdr := &agentdv1.WriteRequest{Msg: &agentdv1.WriteRequest_Header{Header: &agentdv1.WriteHeader{Path: path}}}
	if err := st.Send(hdr); err != nil {
		_, err = st.CloseAndRecv() // the server's reason
		return err
	}
	for off := 0; off < len(data); off += benchChunkSize {
		chunk := data[off:min(off+benchChunkSize, len(data))]
		if err := st.Send(&agentdv1.WriteRequest{Msg: &agentdv1.WriteRequest_Data{Data: chunk}}); err != nil {
			_, err = st.CloseAndRecv()
			return err
		}
	}
	resp, err := st.CloseAndRecv()
	if err != nil {
		return err
	}
	if resp.GetSize() != int64(len(data)) {
		return fmt.Errorf("wrote %d bytes, want %d", resp.GetSize(), len(data))
	}
	return nil
}

// readFile reads path with FileService.Read, checks that it starts with
// head, and returns its size.
func readFile(ctx context.Context, c agentdv1.FileServiceClient, path string, head []byte) (int64, error) {
	st, err := c.Read(ctx, &agentdv1.ReadRequest{Path: path})
	if err != nil {
		return 0, err
	}
	var n int64
	for {
		resp, err := st.Recv()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		data := resp.GetData()
		if n < int64(len(head)) && !bytes.HasPrefix(head[n:], data[:min(len(data), len(head)-int(n))]) {
			return n, errors.New("Read returned other content than the file's")
		}
		n += int64(len(data))
	}
}

// BenchmarkWrite256MB sends a 256 MiB file with FileService.Write in
// 32 KiB chunks, as agentctl write does (atomic: temp file, fsync, rename).
func BenchmarkWrite256MB(b *testing.B) {
	ts := newBenchServer(b)
	c := agentdv1.NewFileServiceClient(ts.Conn)
	ctx := b.Context()
	data := benchContent()
	path := filepath.Join(ts.Options().Workspace, "big.bin")
	if err := writeFile(ctx, c, path, data); err != nil { // warm up
		b.Fatal(err)
	}
	b.SetBytes(benchFileSize)
	for b.Loop() {
		if err := writeFile(ctx, c, path, data); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, data) {
		b.Fatalf("after Write, the file does not hold what was sent (%v)", err)
	}
}

// BenchmarkRead256MB streams a 256 MiB file (in the page cache) to the
// client with FileService.Read.
func BenchmarkRead256MB(b *testing.B) {
	ts := newBenchServer(b)
	c := agentdv1.NewFileServiceClient(ts.Conn)
	ctx := b.Context()
	data := benchContent()
	path := filepath.Join(ts.Options().Workspace, "big.bin")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	head := bytes.Clone(data[:4<<20])
	data = nil // let the GC have it: only the head is checked
	read := func() {
		n, err := readFile(ctx, c, path, head)
		if err != nil {
			b.Fatal(err)
		}
		if n != benchFileSize {
			b.Fatalf("read %d bytes, want %d", n, benchFileSize)
		}
	}
	read() // warm up
	b.SetBytes(benchFileSize)
	for b.Loop() {
		read()
	}
}

// makeSearchTree builds the search tree under root: searchDirs directories
// of searchFilesPerDir text files of 40 lines (~1.8 KB) each; the needle is
// in searchNeedleFiles of them.
func makeSearchTree(tb testing.TB, root string) {
	tb.Helper()
	var body strings.Builder
	for l := range 40 {
		fmt.Fprintf(&body, "line %02d: the quick brown fox jumps over the lazy dog\n", l)
	}
	plain := []byte(body.String())
	needle := []byte(strings.Replace(body.String(), "lazy dog\n", "lazy dog "+searchNeedle+"\n", 1))
	total := searchDirs * searchFilesPerDir
	for d := range searchDirs {
		dir := filepath.Join(root, fmt.Sprintf("d%03d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			tb.Fatal(err)
		}
		for f := range searchFilesPerDir {
			content := plain
			if i := d*searchFilesPerDir + f; i%(total/searchNeedleFiles) == total/searchNeedleFiles/2 {
				content = needle
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d.txt", f)), content, 0o644); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// BenchmarkSearch20k searches a 20,000-file tree for a string in 5 files.
func BenchmarkSearch20k(b *testing.B) {
	ts := newBenchServer(b)
	c := agentdv1.NewFileServiceClient(ts.Conn)
	ctx := b.Context()
	root := filepath.Join(ts.Options().Workspace, "tree")
	makeSearchTree(b, root)
	req := &agentdv1.SearchRequest{Pattern: searchNeedle, Path: root}
	search := func() {
		st, err := c.Search(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		var matches int
		var sum *agentdv1.SearchSummary
		for {
			resp, err := st.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if resp.GetMatch() != nil {
				matches++
			}
			if s := resp.GetSummary(); s != nil {
				sum = s
			}
		}
		if matches != searchNeedleFiles {
			b.Fatalf("%d matches, want %d", matches, searchNeedleFiles)
		}
		if sum == nil || sum.GetFilesScanned() != searchDirs*searchFilesPerDir {
			b.Fatalf("summary %v, want %d files scanned", sum, searchDirs*searchFilesPerDir)
		}
	}
	search() // warm up (grep -r and agentctl grep in scripts/bench.sh get one too)
	for b.Loop() {
		search()
	}
}
