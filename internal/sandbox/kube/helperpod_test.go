package kube

import (
	"archive/tar"
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// storageCluster is a driver on claims of a class of its own, with n
// static volumes (conformance_test.go).
func storageCluster(t *testing.T, n int) *Driver {
	t.Helper()
	class := "agentd-static-" + randHex(4)
	d := newCluster(t, Options{StorageClass: class})
	staticVolumes(t, d, class, n, 64<<20)
	t.Cleanup(func() { noHelperLeft(t, d) })
	return d
}

// A helper Pod runs as root with DAC_OVERRIDE only when it reads (and
// CHOWN, FOWNER, FSETID when it writes), the rest of the sandbox's
// hardening kept (read-only root, no escalation, seccomp), with the claim
// read-only for a read, and is gone once stopped.
func TestHelperPodHardening(t *testing.T) {
	d := storageCluster(t, 1)
	id := create(t, d, testSpec(t, d, "agentd-kt-helper", nil))
	for _, c := range []struct {
		write  bool
		capEff string // CAP_CHOWN 0, DAC_OVERRIDE 1, DAC_READ_SEARCH 2, FOWNER 3, FSETID 4
		ws     string // the workspace mount: writable or not
	}{
		{false, "0000000000000002", "! touch /workspace/probe 2>/dev/null"},
		{true, "000000000000001b", "touch /workspace/probe && rm /workspace/probe"},
	} {
		pod, stop, err := d.startHelper(t.Context(), "export", id, c.write)
		if err != nil {
			t.Fatal(err)
		}
		check := `set -e; [ "$(id -u):$(id -g)" = 0:0 ]; ! touch /probe 2>/dev/null; ` + c.ws + `; ` +
			`grep -q "^CapEff:.` + c.capEff + `" /proc/self/status; grep -q "^CapBnd:.` + c.capEff + `" /proc/self/status; ` +
			`grep -q "^NoNewPrivs:.1" /proc/self/status; grep -q "^Seccomp:.2" /proc/self/status; echo checked`
		var out bytes.Buffer
		if err := d.exec(t.Context(), pod, []string{"sh", "-c", check}, nil, &out); err != nil || strings.TrimSpace(out.String()) != "checked" {
			var st bytes.Buffer
			_ = d.exec(t.Context(), pod, []string{"grep", "-E", "^(Cap|NoNew|Seccomp)", "/proc/self/status"}, nil, &st)
			t.Errorf("the checks in the helper (write %v): %q, %v; %s", c.write, out.String(), err, st.String())
		}
		if err := d.exec(t.Context(), pod, []string{"sh", "-c", "exit 3"}, nil, nil); err == nil {
			t.Error("exec of a command that exits 3: nil error")
		}
		stop()
		if _, err := d.cs.CoreV1().Pods(d.ns).Get(t.Context(), pod, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the helper pod after stop: %v, want not found", err)
		}
	}
}

// An import through the helper cannot write through a symlink out of the
// workspace: the stream fails, and the workspace holds no such file.
func TestHelperImportStaysInWorkspace(t *testing.T) {
	d := storageCluster(t, 1)
	id := create(t, d, testSpec(t, d, "agentd-kt-escape", nil))
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mt := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "out", Linkname: "/tmp", Mode: 0o777, ModTime: mt})
	_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "out/pwned", Size: 1, Mode: 0o644, ModTime: mt})
	_, _ = tw.Write([]byte("x"))
	_ = tw.Close()
	if err := d.ImportWorkspace(t.Context(), id, &buf); err == nil {
		t.Error("import through a symlink out of the workspace: nil error")
	}
	rc, err := d.ExportWorkspace(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read the export: %v", err)
		}
		if h.Typeflag != tar.TypeSymlink {
			t.Errorf("the workspace holds %q (type %q) after the refused import", h.Name, h.Typeflag)
		}
	}
}
