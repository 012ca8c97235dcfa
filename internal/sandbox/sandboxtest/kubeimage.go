package sandboxtest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// kubeImage is the agentd image imported once per test process.
var kubeImage struct {
	once      sync.Once
	ref, skip string
	err       error
}

// KubeAgentdImage returns the kubernetes driver's agentd image of this
// checkout's agentd (AgentdBinary packed at /agentd by tools/k8s/mkpause,
// as make k8s-up packs it), imported into the containerd of the cluster
// whose kubeconfig is kubeconfig (make k8s-up's: its socket is
// containerd/containerd.sock beside the kubeconfig, or
// $AGENTD_K8S_CONTAINERD). The tag is agentd.local/agentd:test-HASH, HASH
// the binary's, so that a run never uses another tree's agentd. It skips
// the test without ctr or the socket (root only).
func KubeAgentdImage(t testing.TB, kubeconfig string) string {
	t.Helper()
	bin := filepath.Join(AgentdBinary(t), "agentd")
	kubeImage.once.Do(func() { kubeImage.ref, kubeImage.skip, kubeImage.err = importAgentd(bin, kubeconfig) })
	if kubeImage.skip != "" {
		t.Skip(kubeImage.skip)
	}
	if kubeImage.err != nil {
		t.Fatalf("sandboxtest: the agentd image: %v", kubeImage.err)
	}
	return kubeImage.ref
}

func importAgentd(bin, kubeconfig string) (ref, skip string, err error) {
	sock := os.Getenv("AGENTD_K8S_CONTAINERD")
	if sock == "" {
		sock = filepath.Join(filepath.Dir(kubeconfig), "containerd", "containerd.sock")
	}
	if _, err := os.Stat(sock); err != nil {
		return "", "no containerd socket of the cluster at " + sock + " (make k8s-up's; else set AGENTD_K8S_CONTAINERD) to import the agentd image into", nil
	}
	if _, err := exec.LookPath("ctr"); err != nil {
		return "", "ctr not found (Debian's containerd package) to import the agentd image", nil
	}
	f, err := os.Open(bin)
	if err != nil {
		return "", "", err
	}
	h := sha256.New()
	_, err = io.Copy(h, f)
	f.Close()
	if err != nil {
		return "", "", err
	}
	ref = "agentd.local/agentd:test-" + hex.EncodeToString(h.Sum(nil))[:12]
	root, err := RepoRoot()
	if err != nil {
		return "", "", err
	}
	dir, err := os.MkdirTemp("", "agentd-kubeimage-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(dir)
	mk := exec.Command("go", "build", "-o", filepath.Join(dir, "mkpause"), "./mkpause")
	mk.Dir = filepath.Join(root, "tools", "k8s")
	if out, err := mk.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("build tools/k8s/mkpause: %v: %s", err, out)
	}
	archive := filepath.Join(dir, "agentd.tar")
	pack := exec.Command(filepath.Join(dir, "mkpause"), "-bin", bin, "-path", "agentd", "-user", "1000:1000", "-name", ref, "-o", archive)
	if out, err := pack.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("mkpause: %v: %s", err, out)
	}
	imp := exec.Command("ctr", "--address", sock, "-n", "k8s.io", "images", "import", "--no-unpack=false", archive)
	if out, err := imp.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("ctr images import: %v: %s", err, out)
	}
	return ref, "", nil
}

// RemoveKubeImagesOf removes from the node's containerd, when t ends, every
// image named under registry (host:port/, a test's own registry), which a
// test had the kubelet pull: images a run leaves pile up in the node's
// status, which lists only its 50 largest. The socket is found as
// KubeAgentdImage finds it (kubeconfig "": $AGENTD_KUBECONFIG, else
// $KUBECONFIG); without it or ctr the images stay (logged).
func RemoveKubeImagesOf(t testing.TB, kubeconfig, registry string) {
	t.Helper()
	if kubeconfig == "" {
		kubeconfig = os.Getenv("AGENTD_KUBECONFIG")
	}
	if kubeconfig == "" {
		kubeconfig = os.Getenv("KUBECONFIG")
	}
	sock := os.Getenv("AGENTD_K8S_CONTAINERD")
	if sock == "" {
		sock = filepath.Join(filepath.Dir(kubeconfig), "containerd", "containerd.sock")
	}
	t.Cleanup(func() {
		out, err := exec.Command("ctr", "--address", sock, "-n", "k8s.io", "images", "ls", "-q").Output()
		if err != nil {
			t.Logf("images of %s left on the node (ctr images ls on %s: %v)", registry, sock, err)
			return
		}
		var refs []string
		for _, ref := range strings.Fields(string(out)) {
			if strings.HasPrefix(ref, registry+"/") {
				refs = append(refs, ref)
			}
		}
		if len(refs) == 0 {
			return
		}
		if out, err := exec.Command("ctr", append([]string{"--address", sock, "-n", "k8s.io", "images", "rm"}, refs...)...).CombinedOutput(); err != nil {
			t.Logf("remove the images of %s from the node: %v: %s", registry, err, out)
		}
	})
}
