package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// runSuite checks a Store against what every backend must do. Each
// subtest uses its own org, so they share one store.
func runSuite(t *testing.T, s *Store) {
	t.Run("RoundTrip", func(t *testing.T) { testRoundTrip(t, s) })
	t.Run("Dedup", func(t *testing.T) { testDedup(t, s) })
	t.Run("Corrupt", func(t *testing.T) { testCorrupt(t, s) })
	t.Run("BadStream", func(t *testing.T) { testBadStream(t, s) })
	t.Run("DeleteGC", func(t *testing.T) { testDeleteGC(t, s) })
	t.Run("PutEntries", func(t *testing.T) { testPutEntries(t, s) })
	t.Run("VerifyRest", func(t *testing.T) { testVerifyRest(t, s) })
}

func put(t testing.TB, s *Store, org string, data []byte) *Manifest {
	t.Helper()
	m, err := s.Put(context.Background(), org, "test", bytes.NewReader(data))
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	return m
}

func restore(t testing.TB, s *Store, org, id string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := s.Restore(context.Background(), org, id, &buf); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	return buf.Bytes()
}

func testRoundTrip(t *testing.T, s *Store) {
	big := strings.Repeat("0123456789abcdef", 20<<10) // 320 KiB: through a temporary file
	in := []tentry{
		{Name: "./", Type: tar.TypeDir, Mode: 0o755}, // the root: not an entry
		{Name: "bin/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "bin/run", Type: tar.TypeReg, Mode: 0o4755, Data: "#!/bin/sh\necho hi\n"},
		{Name: "empty", Type: tar.TypeReg, Mode: 0o600},
		{Name: "same1", Type: tar.TypeReg, Mode: 0o644, Data: "twice"},
		{Name: "same2", Type: tar.TypeReg, Mode: 0o640, Data: "twice", MTime: t0.Add(1500 * time.Millisecond)},
		{Name: "big.bin", Type: tar.TypeReg, Mode: 0o644, Data: big},
		{Name: "hard", Type: tar.TypeLink, Mode: 0o644, Link: "bin/run"},
		{Name: "sticky/", Type: tar.TypeDir, Mode: 0o1777},
		{Name: "link", Type: tar.TypeSymlink, Mode: 0o777, Link: "bin/run"},
		{Name: "dangling", Type: tar.TypeSymlink, Mode: 0o777, Link: "nowhere"},
	}
	m := put(t, s, "rt", makeTar(t, in))
	if m.Files != 6 || m.Dirs != 2 || m.Symlinks != 2 || m.TotalBytes != int64(len(big)+2*18+10) {
		t.Errorf("manifest counts: files %d dirs %d symlinks %d bytes %d", m.Files, m.Dirs, m.Symlinks, m.TotalBytes)
	}
	if m.NewBytes != int64(len(big)+18+5) {
		t.Errorf("NewBytes = %d, want %d (each content once)", m.NewBytes, len(big)+18+5)
	}
	got := readTar(t, restore(t, s, "rt", m.ID))

	want := readTar(t, makeTar(t, in))[1:]
	for i := range want {
		if want[i].Name == "hard" {
			want[i].Mode = 0o644
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("restored stream (-want +got):\n%s", diff)
	}
	if err := s.Verify(context.Background(), "rt", m.ID); err != nil {
		t.Errorf("Verify: %v", err)
	}
	ids, err := s.List(context.Background(), "rt")
	if err != nil || len(ids) != 1 || ids[0] != m.ID {
		t.Errorf("List = %v, %v; want [%s]", ids, err, m.ID)
	}
	g, err := s.Get(context.Background(), "rt", m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(m, g, cmpopts.IgnoreUnexported(Manifest{})); diff != "" {
		t.Errorf("Get (-put +get):\n%s", diff)
	}
}

func testDedup(t *testing.T, s *Store) {
	ctx := context.Background()
	ws := makeTar(t, workspace(1, 40))
	first := put(t, s, "dd", ws)
	if first.NewBytes != first.TotalBytes {
		t.Errorf("first archive: NewBytes %d, TotalBytes %d: want all new", first.NewBytes, first.TotalBytes)
	}
	u1, err := s.Usage(ctx, "dd")
	if err != nil {
		t.Fatal(err)
	}
	// The same workspace with one file changed: only that file is new.
	es := workspace(1, 40)
	es[5].Data = "changed"
	second := put(t, s, "dd", makeTar(t, es))
	if second.NewBytes != int64(len("changed")) {
		t.Errorf("re-archive uploaded %d bytes, want %d (the changed file only)", second.NewBytes, len("changed"))
	}
	u2, err := s.Usage(ctx, "dd")
	if err != nil {
		t.Fatal(err)
	}
	if grown := u2 - u1; grown <= 0 || grown > 16<<10 {
		t.Errorf("usage grew by %d bytes for a re-archive: want the changed file and a manifest only", grown)
	}
	// Another org shares nothing.
	other := put(t, s, "dd-other", ws)
	if other.NewBytes != other.TotalBytes {
		t.Errorf("other org: NewBytes %d, want all %d (no dedup across orgs)", other.NewBytes, other.TotalBytes)
	}
	uo, err := s.Usage(ctx, "dd-other")
	if err != nil {
		t.Fatal(err)
	}
	if uo < other.TotalBytes {
		t.Errorf("other org's usage %d < its content %d", uo, other.TotalBytes)
	}
	if got := readTar(t, restore(t, s, "dd", second.ID)); !cmp.Equal(got, readTar(t, makeTar(t, es))) {
		t.Error("re-archive does not restore the changed workspace")
	}
}

func testCorrupt(t *testing.T, s *Store) {
	ctx := context.Background()
	es := workspace(2, 14)
	m := put(t, s, "cx", makeTar(t, es))
	var small, large *Entry
	for i := range m.Entries {
		e := &m.Entries[i]
		if e.Type != TypeFile {
			continue
		}
		if e.Size < 8<<10 && e.Size > 0 && small == nil {
			small = e
		}
		if e.Size > s.opts.MemoryBytes/4 && large == nil {
			large = e
		}
	}
	if small == nil || large == nil {
		t.Fatal("workspace has no small or no large file")
	}
	for _, tc := range []struct {
		name string
		e    *Entry
		data func(old []byte) []byte // nil: remove the blob
	}{
		{"small flipped", small, func(b []byte) []byte { b[0] ^= 1; return b }},
		{"large flipped", large, func(b []byte) []byte { b[len(b)/2] ^= 1; return b }},
		{"large truncated", large, func(b []byte) []byte { return b[:len(b)-1] }},
		{"small missing", small, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := blobKey("cx", tc.e.SHA256)
			old, err := s.bucket.ReadAll(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := s.bucket.WriteAll(ctx, key, old, nil); err != nil {
					t.Fatal(err)
				}
			})
			if tc.data == nil {
				err = s.bucket.Delete(ctx, key)
			} else {
				err = s.bucket.WriteAll(ctx, key, tc.data(bytes.Clone(old)), nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			_, err = s.Restore(ctx, "cx", m.ID, &buf)
			if !isCorrupt(err) || !strings.Contains(err.Error(), tc.e.Path) {
				t.Errorf("Restore: %v; want a corruption error naming %s", err, tc.e.Path)
			}
			if bytes.HasSuffix(buf.Bytes(), make([]byte, 1024)) {
				t.Error("a failed Restore ended its tar stream (two zero blocks): an importer would take it as complete")
			}
			if err := s.Verify(ctx, "cx", m.ID); !isCorrupt(err) || !strings.Contains(err.Error(), tc.e.Path) {
				t.Errorf("Verify: %v; want a corruption error naming %s", err, tc.e.Path)
			}
		})
	}
	if err := s.Verify(ctx, "cx", m.ID); err != nil {
		t.Errorf("Verify after repair: %v", err)
	}
}

func testBadStream(t *testing.T, s *Store) {
	ctx := context.Background()
	good := makeTar(t, workspace(3, 10))
	for _, tc := range []struct {
		name, org string
		data      []byte
		want      string
	}{
		{"not a tar", "bs", []byte(strings.Repeat("hello world\n", 100)), "not a valid tar"},
		{"truncated", "bs", good[:len(good)/2], "truncated"},
		{"cut between entries", "bs", good[:len(good)-1024], "end marker"},
		{"empty", "bs", nil, "end marker"},
		{"absolute", "bs", makeTar(t, []tentry{{Name: "/etc/passwd", Type: tar.TypeReg, Data: "x"}}), "absolute path"},
		{"climbs out", "bs", makeTar(t, []tentry{{Name: "a/../../x", Type: tar.TypeReg, Data: "x"}}), `climbs out`},
		{"bad hard link", "bs", makeTar(t, []tentry{{Name: "h", Type: tar.TypeLink, Link: "nope"}}), "not an earlier file"},
		{"bad org", "../x", good, "org key"},
		{"empty org", "", good, "org key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := s.Put(ctx, tc.org, "", bytes.NewReader(tc.data))
			if errs.KindOf(err) != errs.Invalid || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Put = %v, %v; want an invalid-input error containing %q", m, err, tc.want)
			}
		})
	}
	t.Run("long label", func(t *testing.T) {
		if _, err := s.Put(ctx, "bs", strings.Repeat("x", 300), bytes.NewReader(good)); errs.KindOf(err) != errs.Invalid {
			t.Errorf("Put with a 300-byte label = %v; want invalid", err)
		}
	})
	// The stream breaks (the tunnel to the sandbox went away) after some
	// files were uploaded; and a Put is cancelled.
	broken := io.MultiReader(bytes.NewReader(good[:len(good)*2/3]), iotest.ErrReader(errors.New("tunnel closed")))
	if _, err := s.Put(ctx, "bs", "", broken); errs.KindOf(err) != errs.Unavailable || !strings.Contains(err.Error(), "tunnel closed") {
		t.Errorf("Put of a broken stream = %v; want its error, classified unavailable", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Put(cctx, "bs", "", bytes.NewReader(good)); !errors.Is(err, context.Canceled) {
		t.Errorf("Put with a cancelled context = %v; want context.Canceled", err)
	}
	if ids, err := s.List(ctx, "bs"); err != nil || len(ids) != 0 {
		t.Errorf("List after refused Puts = %v, %v; want none", ids, err)
	}
	if _, err := s.GC(ctx, "bs"); err != nil {
		t.Fatal(err)
	}
	if u, err := s.Usage(ctx, "bs"); err != nil || u != 0 {
		t.Errorf("Usage after refused Puts and GC = %d, %v; want 0", u, err)
	}
	for _, id := range []string{"", "x", "../20261204T190102Z-0123456789abcdef"} {
		if _, err := s.Get(ctx, "bs", id); errs.KindOf(err) != errs.Invalid {
			t.Errorf("Get(%q) = %v; want invalid", id, err)
		}
	}
	if _, err := s.Get(ctx, "bs", "20261204T190102Z-0123456789abcdef"); errs.KindOf(err) != errs.NotFound {
		t.Errorf("Get of an unknown id = %v; want not found", err)
	}
	if err := s.Delete(ctx, "bs", "20261204T190102Z-0123456789abcdef"); errs.KindOf(err) != errs.NotFound {
		t.Errorf("Delete of an unknown id = %v; want not found", err)
	}
}

func testDeleteGC(t *testing.T, s *Store) {
	ctx := context.Background()
	a := put(t, s, "gc", makeTar(t, workspace(4, 20)))
	es := workspace(4, 20)[:12] // a fork that kept part of the files
	es = append(es, tentry{Name: "fork-only", Type: tar.TypeReg, Mode: 0o644, Data: "mine"})
	b := put(t, s, "gc", makeTar(t, es))
	if b.NewBytes != 4 {
		t.Errorf("fork uploaded %d bytes, want 4", b.NewBytes)
	}
	st, err := s.GC(ctx, "gc")
	if err != nil || st.Removed != 0 || st.Archives != 2 {
		t.Errorf("GC with both archives = %+v, %v; want nothing removed", st, err)
	}
	if err := s.Delete(ctx, "gc", a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "gc", a.ID); errs.KindOf(err) != errs.NotFound {
		t.Errorf("Get after Delete = %v; want not found", err)
	}
	st, err = s.GC(ctx, "gc")
	if err != nil {
		t.Fatal(err)
	}
	if want := a.TotalBytes - (b.TotalBytes - 4); st.RemovedBytes != want {
		t.Errorf("GC removed %d bytes, want %d (the files only the deleted archive had)", st.RemovedBytes, want)
	}
	if err := s.Verify(ctx, "gc", b.ID); err != nil {
		t.Errorf("the fork after GC: %v", err)
	}
	if got := readTar(t, restore(t, s, "gc", b.ID)); !cmp.Equal(got, readTar(t, makeTar(t, es))) {
		t.Error("the fork does not restore after GC")
	}

	// A Put under way elsewhere (a fresh pending marker): GC waits.
	pk := pendingKey("gc", newID(time.Now()))
	if err := s.bucket.WriteAll(ctx, pk, []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "gc", b.ID); err != nil {
		t.Fatal(err)
	}
	st, err = s.GC(ctx, "gc")
	if !errors.Is(err, ErrBusy) || st.Removed != 0 {
		t.Errorf("GC with a Put under way = %+v, %v; want ErrBusy, nothing removed", st, err)
	}
	if err := s.bucket.Delete(ctx, pk); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GC(ctx, "gc"); err != nil {
		t.Fatal(err)
	}
	if u, err := s.Usage(ctx, "gc"); err != nil || u != 0 {
		t.Errorf("Usage with no archive left = %d, %v; want 0", u, err)
	}
}
