package manager

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/terrace-dev/terrace/kit/testenv"
)

// The readiness check fails while an informer of the cache has not synced
// (here: the cache is not started yet) and passes once it has.
func TestCacheSyncedFailsUntilTheInformersSynced(t *testing.T) {
	env := testenv.StartT(t, clientgoscheme.Scheme)
	c, err := cache.New(env.Config, cache.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// An informer exists (as when a controller watches ConfigMaps) but the
	// cache has not started.
	if _, err := c.GetInformer(ctx, &corev1.ConfigMap{}, cache.BlockUntilSynced(false)); err != nil {
		t.Fatal(err)
	}
	check := CacheSynced(c)
	probe := func() error { return check(httptest.NewRequest("GET", "/readyz", nil)) }
	if err := probe(); err == nil || !strings.Contains(err.Error(), "not synced") {
		t.Fatalf("before the cache started: got %v, want an error saying the caches have not synced", err)
	}

	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	if err := probe(); err != nil {
		t.Fatalf("after the cache synced: %v", err)
	}
}
