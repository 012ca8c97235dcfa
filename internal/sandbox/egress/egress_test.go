package egress

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Ensure fails closed, and says what to do, when nft is missing or the
// process may not use it; both are found before the engine is contacted.
func TestEnsureFailsClosed(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("uses a shell script as a stand-in for nft")
	}
	denied := filepath.Join(t.TempDir(), "nft")
	script := "#!/bin/sh\necho 'Error: Could not process rule: Operation not permitted' >&2\nexit 1\n"
	if err := os.WriteFile(denied, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, nft string
		want      error
		says      string
	}{
		{"missing", filepath.Join(t.TempDir(), "no-nft"), ErrNoNFT, "install the nftables package"},
		{"not permitted", denied, ErrPermission, "run agenthub as root or with CAP_NET_ADMIN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n, err := Ensure(t.Context(), Options{NFT: tc.nft, DockerHost: "unix:///nonexistent.sock"})
			if n != nil || !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("Ensure = %v, %v; want %v saying %q", n, err, tc.want, tc.says)
			}
		})
	}
}
