//go:build tools

// Package tools pins the node commands this module builds, at the same
// Kubernetes version as the control plane (hack/tools/kube).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
