// Package stale remembers, per object, the resourceVersions the binder's own
// writes replaced, so that a reconcile of a cached copy older than the
// binder's last write is skipped instead of ending in a 409 Conflict: the
// watch event of that write brings the object back.
package stale

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Versions is safe for concurrent use; the zero value is ready.
type Versions struct {
	mu sync.Mutex
	m  map[types.NamespacedName]map[string]struct{}
}

// Replaced records that a write of this process replaced resourceVersion rv
// of the object key.
func (v *Versions) Replaced(key types.NamespacedName, rv string) {
	if rv == "" {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil {
		v.m = map[types.NamespacedName]map[string]struct{}{}
	}
	if v.m[key] == nil {
		v.m[key] = map[string]struct{}{}
	}
	v.m[key][rv] = struct{}{}
}

// Stale reports whether the cached copy with resourceVersion rv is older than
// a write of this process. A copy that is not is at least as new as every
// recorded write (the cache never goes back), so the record is dropped.
func (v *Versions) Stale(key types.NamespacedName, rv string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	set, ok := v.m[key]
	if !ok {
		return false
	}
	if _, old := set[rv]; old {
		return true
	}
	delete(v.m, key)
	return false
}

// Forget drops what is known of key (the object is gone).
func (v *Versions) Forget(key types.NamespacedName) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.m, key)
}
