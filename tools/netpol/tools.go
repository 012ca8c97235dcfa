//go:build tools

// Package tools pins kube-router, the NetworkPolicy enforcer that
// scripts/k8s-netpol.sh builds and runs beside the local cluster (only its
// firewall: docs/kubernetes.md, "Network").
package tools

import _ "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
