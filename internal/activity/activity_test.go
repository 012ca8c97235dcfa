package activity

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fromOne is a clock that makes a new log number its records from 1.
func fromOne() time.Time { return time.UnixMicro(1) }

func TestAddWatchAndResume(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := Open(Options{Dir: dir, Now: fromOne})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		l.Add(Record{Kind: "file.write", Summary: "wrote", Path: "/x", Bytes: int64(i), Outcome: OK})
	}
	var got []uint64
	if err := l.Watch(t.Context(), 1, false, func(r Record) error { got = append(got, r.Seq); return nil }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]uint64{2, 3}, got); diff != "" {
		t.Errorf("Watch since 1 (-want +got):\n%s", diff)
	}
	if err := l.Watch(t.Context(), 99, false, func(Record) error { t.Error("emitted beyond the end"); return nil }); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ n, want uint64 }{{0, 3}, {1, 2}, {2, 1}, {3, 0}, {10, 0}} {
		if got := l.SeqBefore(tc.n); got != tc.want {
			t.Errorf("SeqBefore(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopening continues the numbering from the file.
	l2, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if r := l2.Add(Record{Kind: "process.start", Outcome: Started}); r.Seq != 4 {
		t.Errorf("seq after reopen = %d, want 4", r.Seq)
	}
	f, err := os.Open(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var seqs []uint64
	if err := ReadFile(f, func(r Record) error { seqs = append(seqs, r.Seq); return nil }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]uint64{1, 2, 3, 4}, seqs); diff != "" {
		t.Errorf("audit file (-want +got):\n%s", diff)
	}
	if fi, _ := os.Stat(filepath.Join(dir, FileName)); fi.Mode().Perm() != 0o600 {
		t.Errorf("audit log mode = %v, want 0600", fi.Mode().Perm())
	}
}

func TestWatchFollowsLive(t *testing.T) {
	t.Parallel()
	l, err := Open(Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan Record)
	done := make(chan error, 1)
	go func() {
		done <- l.Watch(ctx, 0, true, func(r Record) error { got <- r; return nil })
	}()
	for i := 1; i <= 3; i++ {
		l.Add(Record{Kind: "k", Summary: "s"})
		if r := <-got; r.Seq != uint64(i) {
			t.Fatalf("live record seq = %d, want %d", r.Seq, i)
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Watch after cancel = %v", err)
	}
}

// A new audit log numbers its records from the clock: a daemon whose state
// directory was lost (a sandbox restarted without it) still numbers its
// records above everything the hub stored of its previous life.
func TestNewLogNumbersFromTheClock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	now := time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC)
	l, err := Open(Options{Dir: dir, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if r := l.Add(Record{Kind: "k"}); r.Seq != uint64(now.UnixMicro()) {
		t.Errorf("first seq of a new log = %d, want %d (the clock in µs)", r.Seq, now.UnixMicro())
	}
	l.Close()
	l2, err := Open(Options{Dir: dir, Now: func() time.Time { return now.Add(-time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if r := l2.Add(Record{Kind: "k"}); r.Seq != uint64(now.UnixMicro())+1 {
		t.Errorf("seq after reopening = %d, want %d (continued, whatever the clock says)", r.Seq, now.UnixMicro()+1)
	}
}

func TestRingDropsOldest(t *testing.T) {
	t.Parallel()
	l, _ := Open(Options{RingSize: 4})
	for range 10 {
		l.Add(Record{Kind: "k"})
	}
	var got []uint64
	_ = l.Watch(t.Context(), 0, false, func(r Record) error { got = append(got, r.Seq); return nil })
	if diff := cmp.Diff([]uint64{7, 8, 9, 10}, got); diff != "" {
		t.Errorf("ring (-want +got):\n%s", diff)
	}
}

func TestRotation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := Open(Options{Dir: dir, MaxFileBytes: 1000, KeepFiles: 2, Now: fromOne})
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		l.Add(Record{Kind: "file.write", Summary: strings.Repeat("x", 100)})
	}
	l.Close()
	names, _ := filepath.Glob(filepath.Join(dir, "audit.jsonl*"))
	if len(names) != 3 {
		t.Errorf("files after rotation = %v, want audit.jsonl, .1 and .2", names)
	}
	l2, _ := Open(Options{Dir: dir})
	defer l2.Close()
	if r := l2.Add(Record{}); r.Seq != 101 {
		t.Errorf("seq after rotation and reopen = %d, want 101", r.Seq)
	}
}

// A reopened log serves the records of its earlier life again, so a hub
// that missed the last ones before a daemon stopped (no watch was attached)
// gets them when it resumes after the last one it stored; across a rotation,
// up to the ring's size, and never across a gap in the numbering.
func TestReopenReplaysTheTail(t *testing.T) {
	t.Parallel()
	watch := func(l *Log, since uint64) []uint64 {
		t.Helper()
		var got []uint64
		if err := l.Watch(t.Context(), since, false, func(r Record) error { got = append(got, r.Seq); return nil }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	seqs := func(from, to uint64) []uint64 {
		var s []uint64
		for i := from; i <= to; i++ {
			s = append(s, i)
		}
		return s
	}

	t.Run("one file", func(t *testing.T) {
		dir := t.TempDir()
		l, _ := Open(Options{Dir: dir, Now: fromOne})
		for range 5 {
			l.Add(Record{Kind: "process.exit", Summary: "ran"})
		}
		l.Close()
		l2, err := Open(Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer l2.Close()
		if diff := cmp.Diff(seqs(4, 5), watch(l2, 3)); diff != "" {
			t.Errorf("Watch since 3 after reopening (-want +got):\n%s", diff)
		}
		if r := l2.Add(Record{Kind: "k"}); r.Seq != 6 {
			t.Errorf("seq after reopening = %d, want 6", r.Seq)
		}
		if diff := cmp.Diff(seqs(1, 6), watch(l2, 0)); diff != "" {
			t.Errorf("Watch since 0 (-want +got):\n%s", diff)
		}
	})
	t.Run("across a rotation, bounded by the ring", func(t *testing.T) {
		dir := t.TempDir()
		l, _ := Open(Options{Dir: dir, MaxFileBytes: 1000, KeepFiles: 3, Now: fromOne})
		for range 100 {
			l.Add(Record{Kind: "file.write", Summary: strings.Repeat("x", 100)})
		}
		l.Close()
		l2, err := Open(Options{Dir: dir, RingSize: 20})
		if err != nil {
			t.Fatal(err)
		}
		defer l2.Close()
		if diff := cmp.Diff(seqs(81, 100), watch(l2, 0)); diff != "" {
			t.Errorf("replayed after reopening with a ring of 20 (-want +got):\n%s", diff)
		}
	})
	t.Run("not across a gap", func(t *testing.T) {
		dir := t.TempDir()
		lines := `{"seq":7,"kind":"k"}` + "\n" + `{"seq":1000,"kind":"k"}` + "\n" + `not json` + "\n" + `{"seq":1001,"kind":"k"}` + "\n"
		if err := os.WriteFile(filepath.Join(dir, FileName), []byte(lines), 0o600); err != nil {
			t.Fatal(err)
		}
		l, err := Open(Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if diff := cmp.Diff([]uint64{1000, 1001}, watch(l, 0)); diff != "" {
			t.Errorf("replayed (-want +got):\n%s", diff)
		}
		if r := l.Add(Record{Kind: "k"}); r.Seq != 1002 {
			t.Errorf("seq = %d, want 1002", r.Seq)
		}
	})
}

func TestOutputBoundedAndLine(t *testing.T) {
	t.Parallel()
	l, _ := Open(Options{Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }})
	r := l.Add(Record{Kind: "process.exit", Summary: "ran `make`", Output: make([]byte, 1<<20), Outcome: OK, ExitCode: 2, Actor: "alice"})
	if len(r.Output) > MaxOutput {
		t.Errorf("output kept %d bytes, want ≤ %d", len(r.Output), MaxOutput)
	}
	line := r.Line()
	for _, want := range []string{"alice", "ran `make`", "exit 2"} {
		if !strings.Contains(line, want) {
			t.Errorf("Line() = %q, missing %q", line, want)
		}
	}
	if strings.Contains(line, "#") {
		t.Errorf("Line() = %q shows the sequence number", line)
	}
}

// TestLineShowsTheClaim: a direct caller's unchecked claim is shown
// beside the actor, labelled; a record without one shows none.
func TestLineShowsTheClaim(t *testing.T) {
	t.Parallel()
	r := Record{Kind: "files.stat", Summary: "stat /w", Outcome: OK, Actor: "uid:1000(alice)", ClaimedActor: "bob"}
	if line, want := r.Line(), "  uid:1000(alice) (claims: bob)  stat /w  → ok"; !strings.HasSuffix(line, want) {
		t.Errorf("Line() = %q, want it to end %q", line, want)
	}
	r.ClaimedActor = ""
	if line := r.Line(); strings.Contains(line, "claims") {
		t.Errorf("Line() = %q shows a claim nobody made", line)
	}
}

func TestTailFollowsAcrossRotation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := Open(Options{Dir: dir, MaxFileBytes: 600, KeepFiles: 3, Now: fromOne})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Add(Record{Kind: "k", Summary: "before"})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	got := make(chan uint64, 100)
	done := make(chan error, 1)
	go func() {
		done <- Tail(ctx, dir, true, 5*time.Millisecond, func(r Record) error { got <- r.Seq; return nil })
	}()
	if s := <-got; s != 1 {
		t.Fatalf("first tailed seq = %d", s)
	}
	for i := 2; i <= 20; i++ { // enough to rotate several times
		l.Add(Record{Kind: "k", Summary: strings.Repeat("y", 100)})
		if s := <-got; s != uint64(i) {
			t.Fatalf("tailed seq = %d, want %d", s, i)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Tail: %v", err)
	}
}
