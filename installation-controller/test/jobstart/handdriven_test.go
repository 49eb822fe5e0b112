package jobstart_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/controller/installation"
	"github.com/terrace-dev/terrace/kit/app"
	"github.com/terrace-dev/terrace/kit/testenv"
)

// hiding answers reads of the objects for which hidden returns true with
// NotFound: a cache that has not caught up with them yet.
func hiding(hidden func(client.Object) bool) func(*testenv.Env) interceptor.Funcs {
	return func(*testenv.Env) interceptor.Funcs {
		return interceptor.Funcs{
			Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if hidden(obj) {
					return apierrors.NewNotFound(schema.GroupResource{Group: lsv1alpha1.SchemeGroupVersion.Group, Resource: fmt.Sprintf("%T", obj)}, key.Name)
				}
				return cl.Get(ctx, key, obj, opts...)
			},
		}
	}
}

// handDriven starts an API server and a reconciler reading through the
// cache of a manager that is never started (the test calls Reconcile), its
// client wrapped by the interceptor funcs returns; SetupWithManager prepares
// the reconciler and registers its field indexes on that cache, which runs on
// its own. It creates namespace ns.
func handDriven(t *testing.T, ns string, funcs func(*testenv.Env) interceptor.Funcs) (*testenv.Env, *installation.Reconciler, ctrl.Manager) {
	g := NewWithT(t)
	scheme, err := app.Scheme()
	g.Expect(err).NotTo(HaveOccurred())
	env := testenv.StartT(t, scheme)
	ctx := context.Background()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	g.Expect(err).NotTo(HaveOccurred())
	cached, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme, Cache: &client.CacheOptions{Reader: mgr.GetCache()}})
	g.Expect(err).NotTo(HaveOccurred())
	c := interceptor.NewClient(cached, funcs(env))
	r := &installation.Reconciler{Client: c, APIReader: env.Client, Recorder: mgr.GetEventRecorder("hand-driven-test")}
	g.Expect(r.SetupWithManager(ctx, mgr, controller.Options{SkipNameValidation: ptr.To(true)})).To(Succeed())
	cacheCtx, stopCache := context.WithCancel(ctx)
	t.Cleanup(stopCache)
	go func() { _ = mgr.GetCache().Start(cacheCtx) }()
	g.Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	return env, r, mgr
}
