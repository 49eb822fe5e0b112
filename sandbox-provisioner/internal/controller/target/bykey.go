package target

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// byKey maps a target to a value about its SpaceRequest. It is safe for
// concurrent use; the zero value is ready.
type byKey[V comparable] struct {
	mu sync.Mutex
	m  map[types.NamespacedName]V
}

func (u *byKey[V]) set(key types.NamespacedName, v V) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[types.NamespacedName]V{}
	}
	u.m[key] = v
}

func (u *byKey[V]) get(key types.NamespacedName) (V, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	v, ok := u.m[key]
	return v, ok
}

// take returns and forgets key's value.
func (u *byKey[V]) take(key types.NamespacedName) (V, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	v, ok := u.m[key]
	delete(u.m, key)
	return v, ok
}

func (u *byKey[V]) forget(key types.NamespacedName) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.m, key)
}
