package stale

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Get reads key into obj from cache and, when the cache does not hold it,
// from live (the API server). An object written moments ago, by another
// process or in another controller's informer, may not have reached this
// cache yet: "not found" must not be concluded from a cache that lags
// behind, or a job fails (or an object is reclaimed) for an object that
// exists. The uncached read is made only on that miss, never on the normal
// path.
func Get(ctx context.Context, cache, live client.Reader, key client.ObjectKey, obj client.Object) error {
	err := cache.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		err = live.Get(ctx, key, obj)
	}
	return err
}
