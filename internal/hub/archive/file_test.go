package archive

import (
	"context"
	"strings"
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
