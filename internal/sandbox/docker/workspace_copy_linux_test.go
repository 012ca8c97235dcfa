package docker

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// An imported workspace is the sandbox user's, entry by entry, with the
// stream's modes and times, on a plain volume and on a bounded one: the
// sandbox can write into every directory it got back, and the engine's own
// archive of it names uid 1000 everywhere.
func TestImportWorkspaceOwner(t *testing.T) {
	for _, bounded := range []bool{false, true} {
		t.Run(map[bool]string{false: "volume", true: "bounded"}[bounded], func(t *testing.T) {
			d := engine(t)
			if bounded {
				if os.Geteuid() != 0 {
					t.Skip("bounded workspaces need root")
				}
				d = boundedEngine(t)
			}
			image := "agentd-test/driver:import-" + uniqueName(t)[len("agentd-test-"):]
			testImage(t, d, image, false, 0)
			s := testSpec(t, uniqueName(t), image, "exec sleep 300")
			if bounded {
				s.Limits.WorkspaceBytes = 32 << 20
			}
			id := create(t, d, s)

			mt := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			for _, h := range []*tar.Header{
				{Typeflag: tar.TypeDir, Name: "dir/", Mode: 0o750, ModTime: mt},
				{Typeflag: tar.TypeReg, Name: "dir/f", Mode: 0o640, ModTime: mt, Size: 3},
				{Typeflag: tar.TypeSymlink, Name: "dir/l", Linkname: "f", ModTime: mt},
			} {
				h.Uid, h.Gid = 0, 0 // the import must not keep root's
				if err := tw.WriteHeader(h); err != nil {
					t.Fatal(err)
				}
				if h.Size > 0 {
					_, _ = tw.Write([]byte("abc"))
				}
			}
			_ = tw.Close()
			if err := d.ImportWorkspace(t.Context(), id, &buf); err != nil {
				t.Fatalf("ImportWorkspace: %v", err)
			}
			res, err := d.cli.CopyFromContainer(t.Context(), id, client.CopyFromContainerOptions{SourcePath: "/workspace"})
			if err != nil {
				t.Fatal(err)
			}
			defer res.Content.Close()
			tr := tar.NewReader(res.Content)
			seen := 0
			for {
				h, err := tr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if strings.HasPrefix(h.Name, "workspace/lost+found") {
					continue
				}
				seen++
				if h.Uid != uid || h.Gid != gid {
					t.Errorf("%s: owner %d:%d, want %d:%d", h.Name, h.Uid, h.Gid, uid, gid)
				}
				if h.Name == "workspace/dir/f" && (h.Mode&0o7777 != 0o640 || !h.ModTime.Equal(mt)) {
					t.Errorf("%s: mode %o time %s, want 640 %s", h.Name, h.Mode, h.ModTime, mt)
				}
			}
			if seen != 4 {
				t.Errorf("the workspace has %d entries, want 4 (root, dir, f, l)", seen)
			}
			if err := d.Start(t.Context(), id); err != nil {
				t.Fatalf("Start: %v", err)
			}
			if out, code := execIn(t, d, id, "touch /workspace/dir/new && cat /workspace/dir/l"); code != 0 || out != "abc" {
				t.Errorf("the sandbox in its imported workspace: %q, exit %d; want abc, 0", out, code)
			}
		})
	}
}
