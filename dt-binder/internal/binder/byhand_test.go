package binder_test

import (
	"context"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/binding"
	"github.com/terrace-dev/terrace/dt-binder/internal/controller/claim"
)

// startCache runs a manager without controllers whose cache sees only ns,
// with the binder's field indexes, and returns its client (reads from the
// cache, writes to the API server): the Client of a claim reconciler built
// by hand, whose reconciles the test calls one at a time.
func startCache(t *testing.T, ns string) client.Client {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := binding.SetupIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("cache manager: %v", err)
		}
	})
	syncCtx, syncCancel := context.WithTimeout(ctx, timeout)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		t.Fatal("cache did not sync")
	}
	return mgr.GetClient()
}

// eventuallyCached waits until the cache c shows obj at the resourceVersion
// the API server has.
func eventuallyCached(t *testing.T, c client.Reader, obj client.Object) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		live := obj.DeepCopyObject().(client.Object)
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), live)).To(Succeed())
		cached := obj.DeepCopyObject().(client.Object)
		g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(obj), cached)).To(Succeed())
		g.Expect(cached.GetResourceVersion()).To(Equal(live.GetResourceVersion()))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// timeoutClient is a claim reconciler's client whose first claimRef write on
// one target ends in a server timeout: applied on the API server (apply) or
// not, and the cache then shows the copy from before the write, as a lagging
// informer does, until show is called.
type timeoutClient struct {
	client.Client
	target string
	apply  bool

	mu     sync.Mutex
	fired  bool
	hidden *appstudiov1alpha1.DeploymentTarget
}

func (c *timeoutClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if dt, ok := obj.(*appstudiov1alpha1.DeploymentTarget); ok && dt.Name == c.target && !c.fired {
		c.fired = true
		pre := &appstudiov1alpha1.DeploymentTarget{}
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(dt), pre); err != nil {
			return err
		}
		c.hidden = pre
		if c.apply {
			if err := c.Client.Patch(ctx, obj, patch, opts...); err != nil {
				return err
			}
		}
		return apierrors.NewServerTimeout(appstudiov1alpha1.SchemeGroupVersion.WithResource("deploymenttargets").GroupResource(), "patch", 1)
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

// show ends the lag: the cache shows what the informer has.
func (c *timeoutClient) show() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hidden = nil
}

func (c *timeoutClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.mu.Lock()
	hidden := c.hidden
	c.mu.Unlock()
	if dt, ok := obj.(*appstudiov1alpha1.DeploymentTarget); ok && hidden != nil && key == client.ObjectKeyFromObject(hidden) {
		hidden.DeepCopyInto(dt)
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *timeoutClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if dts, ok := list.(*appstudiov1alpha1.DeploymentTargetList); ok && c.hidden != nil {
		for i := range dts.Items {
			if dts.Items[i].Name == c.hidden.Name {
				c.hidden.DeepCopyInto(&dts.Items[i])
			}
		}
	}
	return nil
}

// TestUnknownClaimRefWriteBindsOneTarget: a claimRef write that times out
// may have been applied. The claim's next reconcile, from a cache that still
// shows the target free, asks the API server before it moves on: applied,
// the claim waits for the cache and claims no second target (claiming t1
// again from the stale copy would conflict, and best match would move on to
// t2); not applied, it claims the target as usual, no stall. The claim
// reconciler is built by hand over a cache of the test's namespace (no
// binder runs there); its reconciles are called one at a time.
func TestUnknownClaimRefWriteBindsOneTarget(t *testing.T) {
	for _, applied := range []bool{true, false} {
		name := "not-applied"
		if applied {
			name = "applied"
		}
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			ns := newNamespace(t)
			class := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
			t1, t2 := newTarget(ns, "t1", class.Name, ""), newTarget(ns, "t2", class.Name, "")
			c := newClaim(ns, "c", class.Name, "")
			c.Finalizers = []string{appstudiov1alpha1.ClaimFinalizer}
			create(t, t1, t2, c)
			cached := startCache(t, ns)
			for _, o := range []client.Object{t1, t2, c} {
				eventuallyCached(t, cached, o)
			}
			wc := &timeoutClient{Client: cached, target: "t1", apply: applied}
			r := &claim.Reconciler{Client: wc, APIReader: env.Client, Recorder: events.NewFakeRecorder(100)}
			req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}

			_, err := r.Reconcile(ctx, req)
			g.Expect(apierrors.IsServerTimeout(err)).To(BeTrue(), "the write times out: %v", err)
			wantT1 := ""
			if applied {
				wantT1 = "c"
			}
			g.Expect(claimRefName(getTarget(g, ns, "t1"))).To(Equal(wantT1))

			// The cache still shows t1 as it was before the write.
			_, err = r.Reconcile(ctx, req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(getTarget(g, ns, "t2").Spec.ClaimRef).To(BeNil(), "a claim holds one target")
			g.Expect(claimRefName(getTarget(g, ns, "t1"))).To(Equal("c"))

			// Once the cache shows the write, the claim follows t1.
			wc.show()
			eventuallyCached(t, cached, t1)
			g.Eventually(func(g Gomega) {
				_, err := r.Reconcile(ctx, req)
				g.Expect(err).NotTo(HaveOccurred())
				got := getClaim(g, ns, "c")
				g.Expect(got.Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetClaimPhasePending))
				g.Expect(boundReason(got.Status.Conditions)).To(Equal(appstudiov1alpha1.BindReasonWaitingForTarget))
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
			g.Expect(getTarget(g, ns, "t2").Spec.ClaimRef).To(BeNil())
			g.Expect(claimRefName(getTarget(g, ns, "t1"))).To(Equal("c"))
		})
	}
}

// deletionHidingClient is a claim reconciler's cache that has not seen a
// SpaceRequest's deletion yet: SpaceRequests read through it show no
// deletionTimestamp.
type deletionHidingClient struct{ client.Client }

func (c deletionHidingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if sr, ok := obj.(*toolchainv1alpha1.SpaceRequest); ok {
		sr.DeletionTimestamp = nil
	}
	return nil
}

// TestClaimReconcilerAsksAPIServerForLateTarget: the claim reconciler's two
// Retain paths (the deletion of the claim a late target was made for, and a
// new claim of its name) read the SpaceRequest from the API server, not the
// cache: a cache that has not seen the SpaceRequest's deletion would release
// the late target (Available, for the next claim to bind) while its namespace
// goes away. The claim reconciler is built by hand over a cache hiding the
// deletion (TestClaimReconcilerDoesNotReleaseLateTarget sets the same scenes
// for the binder).
func TestClaimReconcilerAsksAPIServerForLateTarget(t *testing.T) {
	t.Run("claim-deletion", func(t *testing.T) {
		g := NewWithT(t)
		ctx := context.Background()
		ns, c, dt := lateTargetOfDeletingClaim(t, g)
		cached := startCache(t, ns)
		for _, o := range []client.Object{c, dt, &toolchainv1alpha1.SpaceRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "space"}}} {
			eventuallyCached(t, cached, o)
		}

		r := &claim.Reconciler{Client: deletionHidingClient{cached}, APIReader: env.Client, Recorder: events.NewFakeRecorder(100)}
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)})
		g.Expect(err).NotTo(HaveOccurred())
		eventuallyGone(t, &appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}})
		after := getTarget(g, ns, "dt")
		g.Expect(claimRefName(after)).To(Equal("c"), "not released")
		g.Expect(after.Annotations).To(HaveKey(appstudiov1alpha1.ClaimAnnotation))
	})
	t.Run("new-claim-of-the-name", func(t *testing.T) {
		g := NewWithT(t)
		ctx := context.Background()
		ns, earlier, c, dt := lateTargetOfEarlierClaim(t, g)
		cached := startCache(t, ns)
		for _, o := range []client.Object{c, dt, &toolchainv1alpha1.SpaceRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "space"}}} {
			eventuallyCached(t, cached, o)
		}

		r := &claim.Reconciler{Client: deletionHidingClient{cached}, APIReader: env.Client, Recorder: events.NewFakeRecorder(100)}
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)})
		g.Expect(err).NotTo(HaveOccurred())
		after := getTarget(g, ns, "dt")
		g.Expect(claimRefName(after)).To(Equal("c"), "not released")
		g.Expect(after.Annotations).To(HaveKeyWithValue(appstudiov1alpha1.ClaimAnnotation, appstudiov1alpha1.ClaimRecord(earlier)))
	})
}

// TestUnknownRecordWriteOnPreBoundTarget: the write that records the claim on
// a target pre-bound to it by name times out, not applied, and the cache then
// shows the target as before. The target's claimRef already named the claim
// before the write, so it says nothing about the write's outcome: the next
// reconcile asks the API server for the record, finds it missing and writes
// it, instead of waiting for a cache update that no write of the binder will
// bring.
func TestUnknownRecordWriteOnPreBoundTarget(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	class := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
	pre := newTarget(ns, "pre", class.Name, "c")
	c := newClaim(ns, "c", class.Name, "")
	c.Finalizers = []string{appstudiov1alpha1.ClaimFinalizer}
	create(t, pre, c)
	cached := startCache(t, ns)
	for _, o := range []client.Object{pre, c} {
		eventuallyCached(t, cached, o)
	}
	wc := &timeoutClient{Client: cached, target: "pre"}
	r := &claim.Reconciler{Client: wc, APIReader: env.Client, Recorder: events.NewFakeRecorder(100)}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}

	_, err := r.Reconcile(ctx, req)
	g.Expect(apierrors.IsServerTimeout(err)).To(BeTrue(), "the write times out: %v", err)
	g.Expect(getTarget(g, ns, "pre").Annotations).NotTo(HaveKey(appstudiov1alpha1.ClaimAnnotation), "not applied")

	// The cache still shows the target as it was before the write.
	_, err = r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(getTarget(g, ns, "pre").Annotations).To(HaveKeyWithValue(appstudiov1alpha1.ClaimAnnotation, appstudiov1alpha1.ClaimRecord(getClaim(g, ns, "c"))),
		"the record is written on the next reconcile")
}
