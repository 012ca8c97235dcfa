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
	backend := s3mem.New()
	if err := backend.CreateBucket("archives"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	defer srv.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	q := url.Values{
		"endpoint":       {srv.URL},
		"region":         {"us-east-1"},
		"use_path_style": {"true"},
		"disable_https":  {"true"},
	}
	s, err := Open(context.Background(), "s3://archives?"+q.Encode(), testOptions(t))
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
