package archive

import (
	"context"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// TestS3Store runs the suite against a real S3 API on loopback:
// gofakes3 behind a listener on 127.0.0.1, reached through the s3://
// URL and the AWS SDK as production would.
func TestS3Store(t *testing.T) {
	t.Parallel()
	rawURL, backend := newS3(t)
	s, err := Open(context.Background(), rawURL, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runSuite(t, s)

	// The archives are in the S3 server, under the keys the doc names.
	ids, err := s.List(context.Background(), "rt")
	if err != nil || len(ids) != 1 {
		t.Fatalf("List = %v, %v", ids, err)
	}
	if _, err := backend.HeadObject("archives", manifestKey("rt", ids[0])); err != nil {
		t.Errorf("the S3 server has no manifest %s: %v", manifestKey("rt", ids[0]), err)
	}
}

// newS3 starts an S3 server on loopback with a bucket "archives" and
// returns the store URL for it (anonymous: the server checks no
// signatures) and its backend.
func newS3(t *testing.T) (string, *s3mem.Backend) {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket("archives"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	q := url.Values{
		"endpoint":       {srv.URL},
		"region":         {"us-east-1"},
		"use_path_style": {"true"},
		"disable_https":  {"true"},
		"anonymous":      {"true"},
	}
	return "s3://archives?" + q.Encode(), backend
}
