package archive

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/snapshot"
)

// BenchmarkArchiveVsTar archives and restores a workspace of 10,000
// files, 1 GiB in all ($ARCHIVE_BENCH_MB changes the size, for a dry
// run), next to `tar -C WS -cf - . | tar -C NEW -xf -` on the same tree,
// in one run:
//
//   - tar: the baseline copy through a tar pipe;
//   - archive: `tar -C WS -cf -` into Put, into a file:// store;
//   - rearchive: the same, again, into the same store (nothing changed);
//   - restore: Restore into `tar -C NEW -xf -`;
//   - snap-archive: the way through a sandbox's agentd: a snapshot of the
//     tree (internal/snapshot), exported into Put;
//   - snap-rearchive: a snapshot again (unchanged files are not read) and
//     its manifest into PutEntries.
//
// It reports each one's seconds and MB/s, the ratios to tar's throughput
// (targets: archive and restore >= 0.5), the re-archive's new bytes as a
// percentage (target <= 1%) and its time as a fraction of the first
// archive's (target <= 0.2), the same two for the snapshot way. Run
// with -benchtime=1x.
func BenchmarkArchiveVsTar(b *testing.B) {
	mb := 1024
	if v := os.Getenv("ARCHIVE_BENCH_MB"); v != "" {
		var err error
		if mb, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	ws := filepath.Join(b.TempDir(), "ws")
	total := writeBenchTree(b, ws, 10_000, int64(mb)<<20)
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		b.StartTimer()

		tarNew := filepath.Join(dir, "tar-new")
		tarTime := timed(b, func() { sh(b, "tar -C "+ws+" -cf - . | tar -C "+tarNew+" -xf -", tarNew) })

		s, err := Open(ctx, "file://"+filepath.Join(dir, "store"), Options{})
		if err != nil {
			b.Fatal(err)
		}
		var first, again *Manifest
		archiveTime := timed(b, func() { first = putTree(b, s, ws) })
		rearchiveTime := timed(b, func() { again = putTree(b, s, ws) })

		// The way the hub goes through a sandbox's agentd: a snapshot,
		// exported into Put; again, a snapshot (unchanged files are not
		// read) and its manifest into PutEntries.
		snaps, err := snapshot.Open(snapshot.Options{Dir: filepath.Join(dir, "snapshots")})
		must(b, err)
		var snapFirst, snapAgain *Manifest
		snapArchiveTime := timed(b, func() {
			sn, err := snaps.Create(ctx, ws, nil, "ws", nil)
			must(b, err)
			pr, pw := io.Pipe()
			go func() { pw.CloseWithError(snaps.Export(ctx, sn.ID, pw)) }()
			snapFirst, err = s.Put(ctx, "bench-snap", "", pr)
			must(b, err)
		})
		snapRearchiveTime := timed(b, func() {
			sn, err := snaps.Create(ctx, ws, nil, "ws", nil)
			must(b, err)
			_, entries, err := snaps.Get(ctx, sn.ID)
			must(b, err)
			snapAgain, err = s.PutEntries(ctx, "bench-snap", "", fromSnapshot(entries), func(_ context.Context, e Entry) (io.ReadCloser, error) {
				return os.Open(filepath.Join(ws, filepath.FromSlash(e.Path)))
			})
			must(b, err)
		})

		restNew := filepath.Join(dir, "restore-new")
		restoreTime := timed(b, func() {
			must(b, os.MkdirAll(restNew, 0o755))
			cmd := exec.Command("tar", "-C", restNew, "-xf", "-")
			w, err := cmd.StdinPipe()
			must(b, err)
			must(b, cmd.Start())
			_, err = s.Restore(ctx, "bench", first.ID, w)
			must(b, err)
			must(b, w.Close())
			must(b, cmd.Wait())
		})
		must(b, s.Close())

		mbps := func(d time.Duration) float64 { return float64(total) / 1e6 / d.Seconds() }
		b.ReportMetric(tarTime.Seconds(), "tar-s")
		b.ReportMetric(archiveTime.Seconds(), "archive-s")
		b.ReportMetric(rearchiveTime.Seconds(), "rearchive-s")
		b.ReportMetric(restoreTime.Seconds(), "restore-s")
		b.ReportMetric(mbps(tarTime), "tar-MB/s")
		b.ReportMetric(mbps(archiveTime)/mbps(tarTime), "archive/tar")
		b.ReportMetric(mbps(restoreTime)/mbps(tarTime), "restore/tar")
		b.ReportMetric(100*float64(again.NewBytes)/float64(first.TotalBytes), "rearchive-new-%")
		b.ReportMetric(rearchiveTime.Seconds()/archiveTime.Seconds(), "rearchive/archive")
		b.ReportMetric(snapArchiveTime.Seconds(), "snap-archive-s")
		b.ReportMetric(snapRearchiveTime.Seconds(), "snap-rearchive-s")
		b.ReportMetric(100*float64(snapAgain.NewBytes)/float64(snapFirst.TotalBytes), "snap-rearchive-new-%")
		b.ReportMetric(snapRearchiveTime.Seconds()/snapArchiveTime.Seconds(), "snap-rearchive/snap-archive")
	}
}

// fromSnapshot converts a snapshot's manifest to archive entries.
func fromSnapshot(entries []snapshot.Entry) []Entry {
	types := map[snapshot.Type]Type{snapshot.TypeFile: TypeFile, snapshot.TypeDir: TypeDir, snapshot.TypeSymlink: TypeSymlink}
	out := make([]Entry, len(entries))
	for i, e := range entries {
		out[i] = Entry{Path: e.Path, Type: types[e.Type], Mode: e.Mode, Size: e.Size, SHA256: e.SHA256, Target: e.Target, ModTime: e.ModTime}
	}
	return out
}

func timed(b *testing.B, f func()) time.Duration {
	b.Helper()
	start := time.Now()
	f()
	return time.Since(start)
}

func sh(b *testing.B, script, mkdir string) {
	b.Helper()
	must(b, os.MkdirAll(mkdir, 0o755))
	if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
		b.Fatalf("%s: %v\n%s", script, err, out)
	}
}

// putTree archives the tree at ws through `tar -cf -`.
func putTree(b *testing.B, s *Store, ws string) *Manifest {
	b.Helper()
	cmd := exec.Command("tar", "-C", ws, "-cf", "-", ".")
	r, err := cmd.StdoutPipe()
	must(b, err)
	must(b, cmd.Start())
	m, err := s.Put(context.Background(), "bench", "", r)
	must(b, err)
	must(b, cmd.Wait())
	return m
}

// writeBenchTree writes n files of random content, total bytes in all
// (sizes spread from a few bytes to a few times the mean), in 100
// directories; it returns the bytes written.
func writeBenchTree(b *testing.B, root string, n int, total int64) int64 {
	b.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	src := rand.NewChaCha8([32]byte{1})
	sizes := make([]int64, n)
	var sum int64
	for i := range sizes {
		sizes[i] = 1 + int64(r.ExpFloat64()*1000)
		sum += sizes[i]
	}
	var written int64
	buf := make([]byte, 0, 1<<20)
	for i, sz := range sizes {
		sz = sz * total / sum
		dir := filepath.Join(root, fmt.Sprintf("d%02d", i%100))
		must(b, os.MkdirAll(dir, 0o755))
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("f%05d", i)))
		must(b, err)
		for left := sz; left > 0; {
			k := min(left, int64(cap(buf)))
			buf = buf[:k]
			_, _ = src.Read(buf)
			_, err := f.Write(buf)
			must(b, err)
			left -= k
		}
		must(b, f.Close())
		written += sz
	}
	return written
}
