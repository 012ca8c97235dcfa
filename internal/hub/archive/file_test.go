package archive

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/devdepot-ai/agentd/internal/errs"
)

func TestFileStore(t *testing.T) {
	t.Parallel()
	s, err := Open(context.Background(), "file://"+t.TempDir()+"/archive", testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runSuite(t, s)
}

func TestOpenRefusesBadURLs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ url, want string }{
		{"", "no scheme"},
		{"/var/lib/archive", "no scheme"},
		{"file://relative/dir", "absolute directory"},
		{"gs://bucket", `scheme "gs" is not supported`},
		{"s3://", "names no bucket"},
		{"::", "archive URL"},
	} {
		_, err := Open(context.Background(), tc.url, Options{})
		if errs.KindOf(err) != errs.Invalid || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v; want an invalid-argument error containing %q", tc.url, err, tc.want)
		}
	}
}

// TestPutReadsBack damages a blob between its upload and its read-back:
// Put fails naming it, writes no manifest, and removes the bad blob.
func TestPutReadsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opts := testOptions(t)
	var s *Store
	var damaged atomic.Value
	opts.hook = func(point string) {
		key, ok := strings.CutPrefix(point, "blob-written ")
		if !ok || !damaged.CompareAndSwap(nil, key) {
			return
		}
		if err := s.bucket.WriteAll(ctx, key, []byte("not what was uploaded"), nil); err != nil {
			t.Error(err)
		}
	}
	s, err := Open(ctx, "file://"+t.TempDir()+"/archive", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Put(ctx, "rb", "", bytes.NewReader(makeTar(t, workspace(8, 10))))
	key, _ := damaged.Load().(string)
	if !errors.Is(err, ErrCorrupt) || key == "" || !strings.Contains(err.Error(), key) {
		t.Fatalf("Put with a blob damaged after its upload = %v; want a corruption error naming %s", err, key)
	}
	if ids, err := s.List(ctx, "rb"); err != nil || len(ids) != 0 {
		t.Errorf("List = %v, %v; want no archive", ids, err)
	}
	if ok, err := s.bucket.Exists(ctx, key); err != nil || ok {
		t.Errorf("the damaged blob is still there (%v, %v)", ok, err)
	}
}
