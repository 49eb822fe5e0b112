package components

import "github.com/terrace-dev/terrace/kit/ocm"

// ResourceKey is what getResourceKey returns; it lives in kit/ocm so that
// deployers decode the same key.
type ResourceKey = ocm.ResourceKey

// ResourceIdentity is a resource's identity within its component version.
type ResourceIdentity = ocm.ResourceIdentity

// EncodeResourceKey writes k as a key string.
func EncodeResourceKey(k ResourceKey) (string, error) { return ocm.EncodeResourceKey(k) }

// DecodeResourceKey reads a key string.
func DecodeResourceKey(s string) (ResourceKey, error) { return ocm.DecodeResourceKey(s) }
