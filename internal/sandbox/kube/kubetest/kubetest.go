// Package kubetest gives tests a namespace of a real Kubernetes cluster
// (make k8s-up) set up exactly as docs/deploy.md tells an operator to:
// its YAML blocks of "Sandboxes on Kubernetes" (the namespace, the
// ServiceAccount agenthub, its Role and ClusterRole and their bindings, the
// NetworkPolicy) applied with only the namespace's name replaced, and a
// kubeconfig of that ServiceAccount. A driver on that kubeconfig has the
// documented grant and nothing else, so the tests that use it fail when
// the page misses a verb the driver needs.
//
// It exists so that the documented RBAC is the tested one: the driver's
// own tests and the hub's e2e tests on the cluster run with it, not as the
// cluster's admin.
package kubetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
)

// DocNamespace is the namespace docs/deploy.md's YAML names; Namespace
// replaces it, everywhere it occurs, with a fresh one.
const DocNamespace = "agentd-sandboxes"

// ServiceAccount is the hub's identity in docs/deploy.md's YAML.
const ServiceAccount = "agenthub"

// docSection is the heading of docs/deploy.md whose YAML blocks are the
// cluster setup.
const docSection = "## Sandboxes on Kubernetes"

// Admin returns the admin kubeconfig of the cluster ($AGENTD_KUBECONFIG,
// else $KUBECONFIG) and a client on it; it skips t, saying how to start a
// cluster, when none is named or none answers.
func Admin(t testing.TB) (string, kubernetes.Interface) {
	t.Helper()
	path := os.Getenv("AGENTD_KUBECONFIG")
	if path == "" {
		path = os.Getenv("KUBECONFIG")
	}
	if path == "" {
		t.Skip("no cluster: set AGENTD_KUBECONFIG (or KUBECONFIG); `make k8s-up` starts one on this machine and prints the line to paste (docs/kubernetes.md)")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("kubetest: kubeconfig %s: %v", path, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	if _, err := cs.Discovery().ServerVersion(); err != nil {
		t.Skipf("no cluster answers at %s (%v): `make k8s-up` starts one (docs/kubernetes.md)", cfg.Host, err)
	}
	return path, cs
}

// DocYAML returns the YAML documents of docs/deploy.md's "Sandboxes on
// Kubernetes" section, in order.
func DocYAML() ([]string, error) {
	root, err := sandboxtest.RepoRoot()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", "deploy.md"))
	if err != nil {
		return nil, err
	}
	_, sec, ok := strings.Cut(string(b), "\n"+docSection+"\n")
	if !ok {
		return nil, fmt.Errorf("docs/deploy.md has no %q section", docSection)
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	var docs []string
	for {
		var block string
		if _, sec, ok = strings.Cut(sec, "```yaml\n"); !ok {
			break
		}
		if block, sec, ok = strings.Cut(sec, "```"); !ok {
			return nil, errors.New("docs/deploy.md: a ```yaml block does not end")
		}
		for _, d := range strings.Split(block, "\n---\n") {
			if strings.TrimSpace(d) != "" {
				docs = append(docs, d)
			}
		}
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("docs/deploy.md's %q has no ```yaml block", docSection)
	}
	return docs, nil
}

// Namespace applies docs/deploy.md's setup to a fresh namespace named
// prefix-<hex> and returns its name and the path of a kubeconfig for its
// ServiceAccount (a TokenRequest token, an hour). The namespace and the
// cluster-wide objects the page names after it are deleted when t ends.
func Namespace(t testing.TB, admin kubernetes.Interface, adminPath, prefix string) (ns, kubeconfig string) {
	t.Helper()
	docs, err := DocYAML()
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ns = prefix + "-" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var cleanups []func(context.Context) error
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ThawPods(ctx, admin, ns)
		for i := len(cleanups) - 1; i >= 0; i-- {
			if err := cleanups[i](ctx); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("kubetest: %v", err)
			}
		}
	})
	for _, d := range docs {
		d = strings.ReplaceAll(d, DocNamespace, ns)
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(d), nil, nil)
		if err != nil {
			t.Fatalf("kubetest: docs/deploy.md: %v in\n%s", err, d)
		}
		undo, err := create(ctx, admin, obj)
		if err != nil {
			t.Fatalf("kubetest: apply docs/deploy.md's %T: %v", obj, err)
		}
		cleanups = append(cleanups, undo)
	}
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, ServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("kubetest: a token for service account %s/%s: %v", ns, ServiceAccount, err)
	}
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := writeKubeconfig(adminPath, kubeconfig, ns, tr.Status.Token); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	waitGranted(t, kubeconfig, ns)
	return ns, kubeconfig
}

// create makes obj, one of the kinds the page shows, and returns its
// deletion.
func create(ctx context.Context, cs kubernetes.Interface, obj any) (func(context.Context) error, error) {
	opts := metav1.CreateOptions{}
	del := metav1.DeleteOptions{}
	switch o := obj.(type) {
	case *corev1.Namespace:
		_, err := cs.CoreV1().Namespaces().Create(ctx, o, opts)
		return func(ctx context.Context) error { return cs.CoreV1().Namespaces().Delete(ctx, o.Name, del) }, err
	case *corev1.ServiceAccount:
		_, err := cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, opts)
		return nop, err // with its namespace
	case *rbacv1.Role:
		_, err := cs.RbacV1().Roles(o.Namespace).Create(ctx, o, opts)
		return nop, err
	case *rbacv1.RoleBinding:
		_, err := cs.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, opts)
		return nop, err
	case *networkingv1.NetworkPolicy:
		_, err := cs.NetworkingV1().NetworkPolicies(o.Namespace).Create(ctx, o, opts)
		return nop, err
	case *rbacv1.ClusterRole:
		_, err := cs.RbacV1().ClusterRoles().Create(ctx, o, opts)
		return func(ctx context.Context) error { return cs.RbacV1().ClusterRoles().Delete(ctx, o.Name, del) }, err
	case *rbacv1.ClusterRoleBinding:
		_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, o, opts)
		return func(ctx context.Context) error { return cs.RbacV1().ClusterRoleBindings().Delete(ctx, o.Name, del) }, err
	}
	return nop, fmt.Errorf("kind %T: kubetest does not apply it (add it to create)", obj)
}

func nop(context.Context) error { return nil }

func ptr[T any](v T) *T { return &v }

// writeKubeconfig writes a kubeconfig for the admin's cluster (its server
// and CA) with token as the user and ns as the context's namespace.
func writeKubeconfig(adminPath, path, ns, token string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", adminPath)
	if err != nil {
		return err
	}
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		if ca, err = os.ReadFile(cfg.CAFile); err != nil {
			return err
		}
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: ca}
	kc.AuthInfos[ServiceAccount] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["sandboxes"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: ServiceAccount, Namespace: ns}
	kc.CurrentContext = "sandboxes"
	return clientcmd.WriteToFile(*kc, path)
}

// waitGranted waits until the RBAC authorizer has the new bindings (its
// informers follow the API within a moment): until the service account
// may list the namespace's secrets.
func waitGranted(t testing.TB, kubeconfig, ns string) {
	t.Helper()
	cs := Client(t, kubeconfig)
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := cs.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{})
		if err == nil {
			return
		}
		if !apierrors.IsForbidden(err) || time.Now().After(deadline) {
			t.Fatalf("kubetest: the service account's grant in %s: %v", ns, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Client is a client on kubeconfig.
func Client(t testing.TB, kubeconfig string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	cs, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	return cs
}
