package claim

import (
	"context"
	"sync"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terrace-dev/terrace/kit/flow"
)

// createdWait is how long a created object the cache does not show yet is
// waited for before it is written again (it may have been deleted before
// the cache ever saw it).
const createdWait = 30 * time.Second

// createdObjects is safe for concurrent use; the zero value is ready.
type createdObjects struct {
	mu sync.Mutex
	m  map[string]time.Time
}

func createdKey(kind string, key client.ObjectKey) string { return kind + "/" + key.String() }

func (c *createdObjects) add(kind string, key client.ObjectKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]time.Time{}
	}
	c.m[createdKey(kind, key)] = time.Now()
}

// pending returns how much longer to wait for the cache to show an object
// this process created; zero when there is nothing to wait for.
func (c *createdObjects) pending(kind string, key client.ObjectKey) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.m[createdKey(kind, key)]
	if !ok {
		return 0
	}
	if left := createdWait - time.Since(at); left > 0 {
		return left
	}
	delete(c.m, createdKey(kind, key))
	return 0
}

// seen drops the record of an object the cache shows.
func (c *createdObjects) seen(kind string, key client.ObjectKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, createdKey(kind, key))
}

// waitForCreated stops the reconcile when the cache does not show yet an
// object this process created: its watch event brings the claim back.
func (r *Reconciler) waitForCreated(ctx context.Context, kind string, key client.ObjectKey) (flow.Result, bool) {
	left := r.created.pending(kind, key)
	if left == 0 {
		return flow.Continue(), false
	}
	ctrl.LoggerFrom(ctx).V(1).Info("waiting for the cache to show what this provisioner created", "kind", kind, "name", key.Name)
	return flow.Stop().RequeueAfter(left), true
}
