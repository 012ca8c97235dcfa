package kube

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// volumeDir is the host directory of sandbox id's claim: the static
// hostPath volume it is bound to (staticVolumes).
func volumeDir(t *testing.T, d *Driver, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	w, err := d.cs.CoreV1().PersistentVolumeClaims(d.ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + claimName(id)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var c *corev1.PersistentVolumeClaim
	for ev := range w.ResultChan() { // the first event is the claim as it is
		if cl, ok := ev.Object.(*corev1.PersistentVolumeClaim); ok && cl.Status.Phase == corev1.ClaimBound {
			c = cl
			break
		}
	}
	if c == nil {
		t.Fatalf("claim %s: not bound: %v", claimName(id), ctx.Err())
	}
	pv, err := d.cs.CoreV1().PersistentVolumes().Get(t.Context(), c.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.HostPath == nil {
		t.Fatalf("volume %s is not a hostPath volume", pv.Name)
	}
	return pv.Spec.HostPath.Path
}

// entry is a file of a workspace: its mode (permissions and setuid, setgid,
// sticky bits), owner and content.
type entry struct {
	Mode    fs.FileMode
	Owner   string
	Content string
}

// tree reads a workspace directory on the host (as root), its root left
// out; owners "" unless withOwners.
func tree(t *testing.T, dir string, withOwners bool) map[string]entry {
	t.Helper()
	got := map[string]entry{}
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		e := entry{Mode: fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky | fs.ModeDir | fs.ModeSymlink)}
		if withOwners {
			st := fi.Sys().(*syscall.Stat_t)
			e.Owner = fmt.Sprintf("%d:%d", st.Uid, st.Gid)
		}
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.Content = string(b)
		case fi.Mode()&fs.ModeSymlink != 0:
			e.Content, err = os.Readlink(p)
		}
		got[rel] = e
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// fill writes, as root on the host, what a workspace can hold that uid
// 1000 cannot read or write: a mode-000 file, a directory and a file of
// uid 4242 (mode 0700 and 0600), a setuid and a setgid file, a symlink.
func fill(t *testing.T, dir string) {
	t.Helper()
	for _, f := range []struct {
		name, content string
		mode          fs.FileMode
		uid           int
	}{
		{"zero", "no one reads this", 0, uid},
		{"other", "", 0o700 | fs.ModeDir, 4242},
		{"other/f", "uid 4242's", 0o600, 4242},
		{"other/zero", "4242's, mode 000", 0, 4242},
		{"suid", "#!/bin/sh\n", 0o4750, uid},
		{"sgid", "", 0o2750 | fs.ModeDir, uid},
		{"link", "other/f", fs.ModeSymlink, uid},
	} {
		p := filepath.Join(dir, f.name)
		var err error
		switch {
		case f.mode&fs.ModeDir != 0:
			err = os.Mkdir(p, 0o700)
		case f.mode&fs.ModeSymlink != 0:
			err = os.Symlink(f.content, p)
		default:
			err = os.WriteFile(p, []byte(f.content), 0o600)
		}
		if err == nil {
			err = os.Lchown(p, f.uid, f.uid)
		}
		if err == nil && f.mode&fs.ModeSymlink == 0 {
			err = os.Chmod(p, f.mode) // after the chown, which clears setuid
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// owned is want with every owner 1000:1000 (an import's).
func owned(want map[string]entry) map[string]entry {
	got := map[string]entry{}
	for k, e := range want {
		e.Owner = fmt.Sprintf("%d:%d", uid, gid)
		got[k] = e
	}
	return got
}

// A StorageClass workspace keeps every file through the helpers: the
// export reads files uid 1000 cannot (mode 000, another uid's 0700
// directory) and has their modes; its import restores those modes with
// every owner the sandbox user's (as the Docker driver's import); a copy
// goes through one helper Pod (both claims on the one node) and keeps
// modes and owners (as Docker's cp -a); the two-stream copy still works
// and keeps the modes.
func TestHelperKeepsModesAndOwners(t *testing.T) {
	d := storageCluster(t, 4)
	ctx := t.Context()
	src := create(t, d, testSpec(t, d, "agentd-kt-keep", nil))
	srcDir := volumeDir(t, d, src)
	fill(t, srcDir)
	want := tree(t, srcDir, true)

	rc, err := d.ExportWorkspace(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	var exp bytes.Buffer
	_, err = io.Copy(&exp, rc)
	rc.Close()
	if err != nil {
		t.Fatalf("export: %v", err)
	}
	got := map[string]entry{}
	tr := tar.NewReader(bytes.NewReader(exp.Bytes()))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" {
			t.Errorf("export entry %s has an owner (%d:%d %q); the format has none", h.Name, h.Uid, h.Gid, h.Uname)
		}
		fi := h.FileInfo()
		e := entry{Mode: fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky | fs.ModeDir | fs.ModeSymlink)}
		switch h.Typeflag {
		case tar.TypeReg:
			b, _ := io.ReadAll(tr)
			e.Content = string(b)
		case tar.TypeSymlink:
			e.Content = h.Linkname
		}
		got[filepath.Clean(h.Name)] = e
	}
	if diff := cmp.Diff(tree(t, srcDir, false), got); diff != "" {
		t.Errorf("the export (-want +got):\n%s", diff)
	}

	imp := create(t, d, testSpec(t, d, "agentd-kt-keep-imp", nil))
	if err := d.ImportWorkspace(ctx, imp, bytes.NewReader(exp.Bytes())); err != nil {
		t.Fatalf("import: %v", err)
	}
	if diff := cmp.Diff(owned(want), tree(t, volumeDir(t, d, imp), true)); diff != "" {
		t.Errorf("the import (-want +got):\n%s", diff)
	}

	shared := create(t, d, testSpec(t, d, "agentd-kt-keep-cp", nil))
	if err := d.CopyWorkspace(ctx, src, shared); err != nil {
		t.Fatalf("copy: %v", err)
	}
	if s, n := d.copies.shared.Load(), d.copies.streamed.Load(); s != 1 || n != 0 {
		t.Errorf("copies within a node %d, through the hub %d; want 1, 0", s, n)
	}
	if diff := cmp.Diff(want, tree(t, volumeDir(t, d, shared), true)); diff != "" {
		t.Errorf("the copy (-want +got):\n%s", diff)
	}

	d.copies.streamOnly = true
	streamed := create(t, d, testSpec(t, d, "agentd-kt-keep-st", nil))
	if err := d.CopyWorkspace(ctx, src, streamed); err != nil {
		t.Fatalf("copy through the hub: %v", err)
	}
	if s, n := d.copies.shared.Load(), d.copies.streamed.Load(); s != 1 || n != 1 {
		t.Errorf("copies within a node %d, through the hub %d; want 1, 1", s, n)
	}
	if diff := cmp.Diff(owned(want), tree(t, volumeDir(t, d, streamed), true)); diff != "" {
		t.Errorf("the copy through the hub (-want +got):\n%s", diff)
	}
}

// onNode reads a volume's node affinity as the scheduler does.
func TestOnNode(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a", "rank": "5"}}}
	req := func(key string, op corev1.NodeSelectorOperator, vals ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: vals}
	}
	pv := func(terms ...corev1.NodeSelectorTerm) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{NodeAffinity: &corev1.VolumeNodeAffinity{
			Required: &corev1.NodeSelector{NodeSelectorTerms: terms}}}}
	}
	exprs := func(rs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: rs}
	}
	for _, c := range []struct {
		name string
		pv   *corev1.PersistentVolume
		want bool
	}{
		{"no affinity", &corev1.PersistentVolume{}, true},
		{"zone in", pv(exprs(req("zone", corev1.NodeSelectorOpIn, "a", "b"))), true},
		{"zone not in", pv(exprs(req("zone", corev1.NodeSelectorOpNotIn, "a"))), false},
		{"ANDed", pv(exprs(req("zone", corev1.NodeSelectorOpIn, "a"), req("disk", corev1.NodeSelectorOpExists))), false},
		{"ORed", pv(exprs(req("zone", corev1.NodeSelectorOpIn, "b")), exprs(req("disk", corev1.NodeSelectorOpDoesNotExist))), true},
		{"gt", pv(exprs(req("rank", corev1.NodeSelectorOpGt, "4"))), true},
		{"lt", pv(exprs(req("rank", corev1.NodeSelectorOpLt, "4"))), false},
		{"field name", pv(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{req("metadata.name", corev1.NodeSelectorOpIn, "n1")}}), true},
		{"other name", pv(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{req("metadata.name", corev1.NodeSelectorOpIn, "n2")}}), false},
		{"empty term", pv(corev1.NodeSelectorTerm{}), false},
		{"unknown operator", pv(exprs(req("zone", "Near", "a"))), false},
	} {
		if got := onNode(c.pv, node); got != c.want {
			t.Errorf("%s: onNode = %v, want %v", c.name, got, c.want)
		}
	}
}
