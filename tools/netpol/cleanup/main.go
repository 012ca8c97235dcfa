// Command cleanup removes what kube-router's firewall (its network policy
// controller) put in this host's kernel: the KUBE-ROUTER-INPUT, -FORWARD and
// -OUTPUT chains and the jumps to them, the KUBE-NWPLCY-* and KUBE-POD-FW-*
// chains of the filter table, and the KUBE-SRC-* and KUBE-DST-* ipsets. It
// runs the controller's own Cleanup. kube-router's --cleanup-config does not
// do it in v2.1.0 (it calls Cleanup on an empty controller, which has no
// iptables or ipset handlers, and it also cleans the router's and the
// service proxy's state, which kube-router never made here), so this builds
// the controller as kube-router does, on a fake API client holding one Node
// with the node's address (cleanup needs no cluster: it runs after the API
// server is gone too).
//
//	cleanup -node agentd-k8s -node-ip 10.213.0.1 -service-cidr 10.214.0.0/24
package main

import (
	"context"
	"flag"
	"log"
	"sync"

	"github.com/cloudnativelabs/kube-router/v2/pkg/controllers/netpol"
	"github.com/cloudnativelabs/kube-router/v2/pkg/options"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func main() {
	node := flag.String("node", "agentd-k8s", "the node's name (kube-router's --hostname-override)")
	ip := flag.String("node-ip", "10.213.0.1", "the node's InternalIP")
	svc := flag.String("service-cidr", "10.214.0.0/24", "the cluster's service range (kube-router's --service-cluster-ip-range)")
	flag.Parse()

	cs := fake.NewSimpleClientset(&corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: *node},
		Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: *ip}}},
	})
	if _, err := cs.CoreV1().Nodes().Get(context.Background(), *node, metav1.GetOptions{}); err != nil {
		log.Fatal(err)
	}
	cfg := options.NewKubeRouterConfig()
	cfg.HostnameOverride, cfg.ClusterIPCIDRs, cfg.EnableIPv4, cfg.EnableIPv6 = *node, []string{*svc}, true, false
	ipt, ipsets, err := netpol.NewIPTablesHandlers(cfg)
	if err != nil {
		log.Fatal(err)
	}
	f := informers.NewSharedInformerFactory(cs, 0)
	var mu sync.Mutex
	npc, err := netpol.NewNetworkPolicyController(cs, cfg, f.Core().V1().Pods().Informer(),
		f.Networking().V1().NetworkPolicies().Informer(), f.Core().V1().Namespaces().Informer(), &mu, ipt, ipsets)
	if err != nil {
		log.Fatal(err)
	}
	npc.Cleanup()
}
