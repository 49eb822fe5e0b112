// Package stale holds the rule every Terrace controller uses to recognise a
// cached copy that is older than its own last write.
//
// A controller reads objects from its informer cache and writes them to the
// API server. Right after a write the cache still shows the copy the write
// replaced until the write's watch event arrives; a reconcile woken
// meanwhile (by another object's event, a requeue) would compute its writes
// from that copy, and they could only end in a 409 Conflict (or repeat what
// was just written). Such a reconcile is skipped instead: the watch event of
// the write brings the next one.
//
// resourceVersions are opaque strings: the Kubernetes API conventions forbid
// comparing them as numbers, so "older than my write" cannot be asked of a
// version directly. The rule is set membership instead: a cached copy is
// stale when its resourceVersion is one that this process's own writes
// replaced. The cache of one informer never goes back, and a replaced
// version is never the current one again, so membership never skips a
// current copy — provided a caller records a version only when its write
// really replaced it (a write that changed nothing on the server keeps the
// resourceVersion and must record nothing).
//
// The record is not dropped when a newer copy is seen: the versions a
// controller replaced do not always come from the cache (a write may start
// from another write's response, newer than the cache), so an unrecorded
// copy says nothing about the recorded ones. Instead only the last Depth
// replaced versions are kept per object, which bounds the record of an
// object written often, and Forget drops it when the object is gone (or when
// the caller knows the cache has caught up).
//
// A different rule, "the cached copy is exactly the version I wrote, so it
// holds what I wrote", answers another question (may a write be left out?)
// and is not this package's.
package stale

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Depth is how many replaced resourceVersions are kept per object: the
// versions one reconcile's writes replace (metadata, status, a follow-up
// patch), with room to spare. Older ones are dropped first; the cache has
// shown a newer copy long since.
const Depth = 4

// Versions records, per object, the resourceVersions this process's writes
// replaced. It is safe for concurrent use; the zero value is ready.
type Versions struct {
	mu sync.RWMutex
	m  map[types.NamespacedName][]string
}

// Replaced records that writes of this process replaced the resourceVersions
// rvs of the object key, oldest first. Empty versions and versions recorded
// already are ignored; beyond Depth the oldest record goes.
func (v *Versions) Replaced(key types.NamespacedName, rvs ...string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, rv := range rvs {
		list := v.m[key]
		if rv == "" || slices.Contains(list, rv) {
			continue
		}
		if len(list) >= Depth {
			list = slices.Delete(list, 0, len(list)-Depth+1)
		}
		if v.m == nil {
			v.m = map[types.NamespacedName][]string{}
		}
		v.m[key] = append(list, rv)
	}
}

// Stale reports whether the cached copy of key at resourceVersion rv is older
// than a write of this process, i.e. rv is one of the recorded versions.
func (v *Versions) Stale(key types.NamespacedName, rv string) bool {
	if rv == "" {
		return false
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	return slices.Contains(v.m[key], rv)
}

// Forget drops what is recorded for key: the object is gone, or the caller
// saw the cache catch up with its writes.
func (v *Versions) Forget(key types.NamespacedName) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.m, key)
}
