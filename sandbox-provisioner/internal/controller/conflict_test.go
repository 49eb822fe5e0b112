package controller_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/controller/orphan"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/controller/target"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/sandbox"
)

// racedAnnotation is what racingClient's other writer sets on the target.
const racedAnnotation = "test.terrace.dev/raced"

// racingClient plays another controller (the dt-binder, say) writing a
// DeploymentTarget at the very moment the provisioner writes it: just before
// the first target write (patch or delete) passed to it, it changes that
// target on the API server, so that the provisioner's write, guarded by the
// resourceVersion it read, is refused with a conflict. Every other call goes
// straight to the API server.
type racingClient struct {
	client.Client
	t     *testing.T
	races atomic.Int32
	// always races every target write, not only the first: a writer that
	// keeps changing the target.
	always bool
}

func (c *racingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.race(ctx, obj)
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *racingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.race(ctx, obj)
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *racingClient) race(ctx context.Context, obj client.Object) {
	if _, ok := obj.(*appstudiov1alpha1.DeploymentTarget); !ok {
		return
	}
	race := c.races.Add(1)
	if race > 1 && !c.always {
		return
	}
	g := NewWithT(c.t)
	cur := &appstudiov1alpha1.DeploymentTarget{}
	g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(obj), cur)).To(Succeed())
	base := cur.DeepCopy()
	metav1.SetMetaDataAnnotation(&cur.ObjectMeta, racedAnnotation, strconv.Itoa(int(race)))
	g.Expect(c.Client.Patch(ctx, cur, client.MergeFrom(base))).To(Succeed())
}

// eventRecorder keeps the Events a reconciler records (reason and note).
type eventRecorder struct {
	mu     sync.Mutex
	events [][2]string
}

func (r *eventRecorder) Eventf(_, _ runtime.Object, _, reason, _, note string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, [2]string{reason, fmt.Sprintf(note, args...)})
}

// takeEvents returns the Events recorded since the last take, each as f
// renders it.
func (r *eventRecorder) takeEvents(f func(reason, note string) string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		out = append(out, f(e[0], e[1]))
	}
	r.events = nil
	return out
}

// take returns the reasons recorded since the last take.
func (r *eventRecorder) take() []string {
	return r.takeEvents(func(reason, _ string) string { return reason })
}

// takeNotes returns "reason: note" of each Event recorded since the last take.
func (r *eventRecorder) takeNotes() []string {
	return r.takeEvents(func(reason, note string) string { return reason + ": " + note })
}

// createConflictTarget creates a provisioned target whose SpaceRequest does
// not exist. No provisioner runs in these tests: the target is removed when
// the test ends, so that none runs into it later.
func createConflictTarget(t *testing.T, ns string, finalizer bool) *appstudiov1alpha1.DeploymentTarget {
	t.Helper()
	ctx := context.Background()
	dt := conflictTarget(ns, finalizer)
	NewWithT(t).Expect(env.Client.Create(ctx, dt)).To(Succeed())
	t.Cleanup(func() {
		cur := &appstudiov1alpha1.DeploymentTarget{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(dt), cur); err != nil {
			return
		}
		base := cur.DeepCopy()
		cur.Finalizers = nil
		if err := env.Client.Patch(ctx, cur, client.MergeFrom(base)); err != nil {
			t.Errorf("cleaning up: %v", err)
		}
		if err := client.IgnoreNotFound(env.Client.Delete(ctx, cur)); err != nil {
			t.Errorf("cleaning up: %v", err)
		}
	})
	return dt
}

// conflictTarget is createConflictTarget's object, not created.
func conflictTarget(ns string, finalizer bool) *appstudiov1alpha1.DeploymentTarget {
	claim := &appstudiov1alpha1.DeploymentTargetClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"},
		Spec:       appstudiov1alpha1.DeploymentTargetClaimSpec{DeploymentTargetClassName: ns},
	}
	sr := &toolchainv1alpha1.SpaceRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sandbox.ObjectName(claim)}}
	dt := newLateTarget(claim, sr)
	if !finalizer {
		dt.Finalizers = nil
	}
	return dt
}

// reconcileLosingRace runs r's first reconcile of dt, whose guarded write c
// makes lose a race: a race lost is no error, the reconcile asks to run
// again, and no failure Event is recorded (noEvent says which). It then checks
// that the racing writer changed dt before the reconciler's write, so that the
// write was refused: the test provoked the conflict it is about.
func reconcileLosingRace(g *WithT, r reconcile.Reconciler, c *racingClient, rec *eventRecorder, dt *appstudiov1alpha1.DeploymentTarget, noEvent string) *appstudiov1alpha1.DeploymentTarget {
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(dt)})
	g.Expect(err).NotTo(HaveOccurred(), "a conflict is a race lost, not an error")
	g.Expect(res.RequeueAfter).To(BeNumerically(">", 0), "the reconcile runs again")
	g.Expect(rec.take()).To(BeEmpty(), noEvent)
	g.Expect(c.races.Load()).To(BeNumerically(">=", 1), "the reconciler wrote the target")
	cur := &appstudiov1alpha1.DeploymentTarget{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(dt), cur)).To(Succeed())
	g.Expect(cur.Annotations).To(HaveKey(racedAnnotation))
	return cur
}

// TestConflictOnFinalizerRemovalIsRetried: the dt-binder writes a deleted
// target at the moment the provisioner removes its finalizer (guarded by the
// resourceVersion it read), so the removal is refused with a conflict. That
// is an expected race, not a failure: the reconcile returns no error (no
// "Reconciler error" with a stack trace, no DeprovisioningFailed Event) and
// asks to run again, and the retry removes the finalizer.
func TestConflictOnFinalizerRemovalIsRetried(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	n := unique("conflict-release")
	createNamespace(t, n)
	dt := createConflictTarget(t, n, true)
	g.Expect(env.Client.Delete(ctx, dt)).To(Succeed())

	c := &racingClient{Client: env.Client, t: t}
	rec := &eventRecorder{}
	r := &target.Reconciler{Client: c, APIReader: env.Client, Recorder: rec}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(dt)}

	cur := reconcileLosingRace(g, r, c, rec, dt, "no DeprovisioningFailed, nothing released yet")
	g.Expect(cur.Finalizers).To(ContainElement(appstudiov1alpha1.TargetFinalizer), "the refused write removed nothing")

	// The retry reads the newer copy and releases the target.
	_, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gone(dt)()).To(BeTrue(), "the finalizer was removed and the target is gone")
	g.Expect(rec.take()).To(Equal([]string{target.EventDeprovisioned}))
}

// TestConflictOnFinalizerAddIsRetried: the same race on a live target the
// provisioner adds its finalizer to.
func TestConflictOnFinalizerAddIsRetried(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	n := unique("conflict-add")
	createNamespace(t, n)
	dt := createConflictTarget(t, n, false)

	c := &racingClient{Client: env.Client, t: t}
	rec := &eventRecorder{}
	r := &target.Reconciler{Client: c, APIReader: env.Client, Recorder: rec}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(dt)}

	cur := reconcileLosingRace(g, r, c, rec, dt, "no DeprovisioningFailed")
	g.Expect(cur.Finalizers).To(BeEmpty(), "the refused write added nothing")

	_, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(dt), cur)).To(Succeed())
	g.Expect(cur.Finalizers).To(ConsistOf(appstudiov1alpha1.TargetFinalizer))
}

// TestConflictOnLateTargetDeletionIsRetried: the orphan reconciler deletes a
// late target (made from a SpaceRequest that is gone, for a claim that is
// gone, never bound) preconditioned on the resourceVersion it confirmed; a
// write to the target in between refuses the deletion with a conflict, which
// is retried the same way, and the retry deletes the target.
func TestConflictOnLateTargetDeletionIsRetried(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	n := unique("conflict-late")
	createNamespace(t, n)
	dt := createConflictTarget(t, n, true)

	c := &racingClient{Client: env.Client, t: t}
	rec := &eventRecorder{}
	r := &orphan.Reconciler{Client: c, APIReader: env.Client, Recorder: rec}
	// The SpaceRequest of the target's name is gone: the late-target check.
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(dt)}

	cur := reconcileLosingRace(g, r, c, rec, dt, "no OrphanCleanupFailed")
	g.Expect(cur.DeletionTimestamp).To(BeNil(), "the refused deletion deleted nothing")

	_, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(dt), cur)).To(Succeed())
	g.Expect(cur.DeletionTimestamp).NotTo(BeNil(), "deleted on the retry (its finalizer holds it)")
	g.Expect(rec.take()).To(Equal([]string{orphan.EventOrphanDeleted}))
}

// TestRecurringConflictIsReported: a writer that changes the target before
// every one of the provisioner's writes is no race lost but something the
// user must see. The retries back off (each delay longer than the one
// before), the first flow.ConflictsBeforeReport-1 conflicts are quiet,
// and the next one is reported as a DeprovisioningFailed Event, still
// without a "Reconciler error". Nothing is written meanwhile.
func TestRecurringConflictIsReported(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	n := unique("conflict-recurring")
	createNamespace(t, n)
	dt := createConflictTarget(t, n, false)

	c := &racingClient{Client: env.Client, t: t, always: true}
	rec := &eventRecorder{}
	r := &target.Reconciler{Client: c, APIReader: env.Client, Recorder: rec}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(dt)}

	var last time.Duration
	for i := 1; i <= flow.ConflictsBeforeReport; i++ {
		res, err := r.Reconcile(ctx, req)
		g.Expect(err).NotTo(HaveOccurred(), "conflict %d: a conflict is not returned as an error", i)
		g.Expect(res.RequeueAfter).To(BeNumerically(">", last), "conflict %d: the retry backs off", i)
		last = res.RequeueAfter
		g.Expect(c.races.Load()).To(BeNumerically("==", i), "each reconcile wrote the target once, and lost")
		if i < flow.ConflictsBeforeReport {
			g.Expect(rec.take()).To(BeEmpty(), "conflict %d: not reported yet", i)
		} else {
			g.Expect(rec.take()).To(Equal([]string{target.EventDeprovisioningFailed}), "conflict %d: reported", i)
		}
	}
	cur := &appstudiov1alpha1.DeploymentTarget{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(dt), cur)).To(Succeed())
	g.Expect(cur.Finalizers).To(BeEmpty(), "every refused write added nothing")
}
