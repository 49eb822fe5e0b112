//go:build tools

// Package tools pins the container runtime commands this module builds:
// containerd and its runc shim (runc itself comes from the distribution).
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
