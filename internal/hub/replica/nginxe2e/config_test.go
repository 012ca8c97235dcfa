package nginxe2e

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDeployDocShowsTheTestedConfig: docs/deploy.md shows the nginx
// configuration the end-to-end test runs, byte for byte, so the page and
// the test cannot drift apart. It needs no nginx.
func TestDeployDocShowsTheTestedConfig(t *testing.T) {
	t.Parallel()
	conf, err := os.ReadFile(confPath)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../../../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(doc), "```nginx\n")
	if !ok {
		t.Fatal("docs/deploy.md has no ```nginx block")
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		t.Fatal("docs/deploy.md: the ```nginx block does not end")
	}
	if diff := cmp.Diff(string(conf), block); diff != "" {
		t.Errorf("docs/deploy.md's nginx block differs from docs/nginx/agenthub.conf (-file +page):\n%s", diff)
	}
	if strings.Count(string(doc), "```nginx") != 1 {
		t.Error("docs/deploy.md has more than one ```nginx block: show the tested configuration once")
	}
}
