//go:build tools

// Package tools pins the OCI distribution registry this module builds.
package tools

import _ "github.com/distribution/distribution/v3/cmd/registry"
