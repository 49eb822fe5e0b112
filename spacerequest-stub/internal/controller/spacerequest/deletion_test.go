package spacerequest_test

// Deletion paths that are not the happy one: a step that fails, a
// SpaceRequest whose finalizer was removed by hand, a namespace that lost the
// stub's label (so its deletion sends the stub no event).

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/observabilitytest"
	"github.com/terrace-dev/terrace/spacerequest-stub/internal/controller/spacerequest"
)

// refuseNamespaceDeletion installs a ValidatingAdmissionPolicy refusing the
// deletion of the namespace name (by anyone), waits until it is in force,
// and returns a function removing it again.
func refuseNamespaceDeletion(t *testing.T, g Gomega, name, message string) func() {
	t.Helper()
	ctx := context.Background()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "test-refuse-" + name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"namespaces"}},
				},
			}}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "the-namespace", Expression: "request.name == '" + name + "'"}},
			Validations:     []admissionregistrationv1.Validation{{Expression: "false", Message: message}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	g.Expect(env.Client.Create(ctx, policy)).To(Succeed())
	g.Expect(env.Client.Create(ctx, binding)).To(Succeed())
	// In force once a dry-run deletion (admission runs, nothing is deleted)
	// is refused.
	g.Eventually(func() error {
		return env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.DryRunAll)
	}).WithTimeout(timeout).WithPolling(interval).Should(MatchError(ContainSubstring(message)))
	return func() {
		g.Expect(env.Client.Delete(ctx, binding)).To(Succeed())
		g.Expect(env.Client.Delete(ctx, policy)).To(Succeed())
	}
}

// message returns the SpaceRequest's Ready message ("" without one).
func message(key client.ObjectKey) func(g Gomega) string {
	return func(g Gomega) string {
		if c := ready(g, key); c != nil {
			return c.Message
		}
		return ""
	}
}

// TestDeletionFailureIsReported: a deletion step that fails (here the
// namespace's deletion, refused by an admission policy) shows in the Ready
// condition's message and as a Warning event at once, and turns into
// UnableToTerminate when the termination timeout passes, whichever step
// failed; the condition's lastTransitionTime then says when UnableToTerminate
// began (not when Ready went False). Once the step succeeds, deletion
// completes.
func TestDeletionFailureIsReported(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := env.Client
	sr, key, provisioned := provisionedEnv(t, g, "team-refused")

	const refusal = "test refuses this deletion"
	allow := refuseNamespaceDeletion(t, g, provisioned, refusal)
	g.Expect(c.Delete(ctx, sr)).To(Succeed())

	// Before the timeout: Terminating, saying why it is stuck.
	g.Eventually(func(g Gomega) {
		cond := ready(g, key)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Reason).To(Equal(toolchainv1alpha1.ReasonTerminating))
		g.Expect(cond.Message).To(ContainSubstring(refusal))
	}).WithTimeout(timeout).WithPolling(20 * time.Millisecond).Should(Succeed())
	g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, c, sr.Namespace, "env") }).
		WithTimeout(timeout).WithPolling(interval).Should(ContainElement("Warning/" + spacerequest.EventTerminationFailed))

	// After it: UnableToTerminate, still saying why, with the time it began.
	g.Eventually(reason(key)).WithTimeout(timeout).WithPolling(interval).Should(Equal(toolchainv1alpha1.ReasonUnableToTerminate))
	g.Expect(c.Get(ctx, key, sr)).To(Succeed())
	cond := ready(g, key)
	g.Expect(cond.Message).To(ContainSubstring(refusal))
	g.Expect(cond.LastTransitionTime.Time).To(BeTemporally(">=", sr.DeletionTimestamp.Add(terminationTimeout)),
		"lastTransitionTime is when UnableToTerminate began")
	g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, c, sr.Namespace, "env") }).
		WithTimeout(timeout).WithPolling(interval).Should(ContainElement("Warning/" + spacerequest.EventUnableToTerminate))
	ns := &corev1.Namespace{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: provisioned}, ns)).To(Succeed())
	g.Expect(ns.DeletionTimestamp).To(BeNil())

	// The refusal goes: the stub's retry deletes the namespace, and the
	// SpaceRequest goes with it.
	allow()
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKey{Name: provisioned}, ns)).To(Succeed())
		g.Expect(ns.DeletionTimestamp).NotTo(BeNil())
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	g.Eventually(message(key)).WithTimeout(timeout).WithPolling(interval).
		ShouldNot(ContainSubstring(refusal), "a step that succeeds again clears the error from the message")
	finalizeNamespace(t, g, provisioned)
	g.Eventually(func() bool { return apierrors.IsNotFound(c.Get(ctx, key, &toolchainv1alpha1.SpaceRequest{})) }).
		WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
}

// TestForceDeletedSpaceRequestLeavesNoNamespace: a SpaceRequest whose
// finalizer was removed by hand goes without the stub's clean-up; the stub
// still deletes the namespace it provisioned for it (and with it the
// ServiceAccount whose tokens were handed out), and records an event on the
// namespace.
func TestForceDeletedSpaceRequestLeavesNoNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := env.Client
	_, key, provisioned := provisionedEnv(t, g, "team-forced")

	// Remove the finalizer and delete at once: the stub would add its
	// finalizer again if it saw the SpaceRequest without one, so the delete
	// is preconditioned on the version without it.
	g.Eventually(func() error {
		current := &toolchainv1alpha1.SpaceRequest{}
		if err := c.Get(ctx, key, current); err != nil {
			return err
		}
		base := current.DeepCopy()
		current.Finalizers = nil
		if err := c.Patch(ctx, current, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
		return c.Delete(ctx, current, client.Preconditions{ResourceVersion: &current.ResourceVersion})
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	g.Expect(apierrors.IsNotFound(c.Get(ctx, key, &toolchainv1alpha1.SpaceRequest{}))).To(BeTrue())

	ns := &corev1.Namespace{}
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKey{Name: provisioned}, ns)).To(Succeed())
		g.Expect(ns.DeletionTimestamp).NotTo(BeNil())
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed(), "the namespace of the force-deleted SpaceRequest is deleted")
	g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, c, metav1.NamespaceDefault, provisioned) }).
		WithTimeout(timeout).WithPolling(interval).Should(ContainElement("Warning/" + spacerequest.EventOrphanedNamespaceDeleted))
	finalizeNamespace(t, g, provisioned)
}

// TestUnlabelledNamespaceDeletionIsNoticed: the stub waits for a namespace to
// go by its deletion event, which comes from its label-filtered cache; a
// namespace that lost the stub's label sends none. The stub then looks again
// by itself (bounded back-off): when a deleted SpaceRequest's namespace goes,
// and when a new SpaceRequest waits for an earlier one's namespace to go.
func TestUnlabelledNamespaceDeletionIsNoticed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := env.Client
	unlabel := func(name string) {
		t.Helper()
		g.Expect(c.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}},
			client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":null}}}`)))).To(Succeed())
	}

	// Deletion: the namespace loses its label while terminating, after the
	// termination timeout (so no timed requeue is pending either).
	sr, key, provisioned := provisionedEnv(t, g, "team-unlabelled")
	g.Expect(c.Delete(ctx, sr)).To(Succeed())
	g.Eventually(reason(key)).WithTimeout(timeout).WithPolling(interval).Should(Equal(toolchainv1alpha1.ReasonUnableToTerminate))
	unlabel(provisioned)
	finalizeNamespace(t, g, provisioned)
	g.Eventually(func() bool { return apierrors.IsNotFound(c.Get(ctx, key, &toolchainv1alpha1.SpaceRequest{})) }).
		WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "the SpaceRequest is released once its unlabelled namespace is gone")

	// Provisioning: a namespace of an earlier SpaceRequest of the same name,
	// unlabelled and terminating, goes.
	team := unique("team-unlabelled")
	createNamespace(t, g, team)
	provisioned = nsName(team, "env")
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: provisioned,
		Annotations: map[string]string{spacerequest.SpaceRequestAnnotation: team + "/env"}}})).To(Succeed())
	g.Expect(c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: provisioned}})).To(Succeed())
	sr = newSpaceRequest(team, "env")
	g.Expect(c.Create(ctx, sr)).To(Succeed())
	key = client.ObjectKeyFromObject(sr)
	g.Eventually(message(key)).WithTimeout(timeout).WithPolling(interval).Should(ContainSubstring("still terminating"))
	finalizeNamespace(t, g, provisioned)
	g.Eventually(reason(key)).WithTimeout(timeout).WithPolling(interval).Should(Equal(toolchainv1alpha1.ReasonProvisioned))
	g.Expect(c.Delete(ctx, sr)).To(Succeed())
	g.Eventually(func(g Gomega) {
		ns := &corev1.Namespace{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: provisioned}, ns)).To(Succeed())
		g.Expect(ns.DeletionTimestamp).NotTo(BeNil())
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	finalizeNamespace(t, g, provisioned)
}

// provisionedEnv creates SpaceRequest "env" in a new namespace named after
// prefix and waits until it is Provisioned. It returns the SpaceRequest, its
// key and the namespace provisioned for it.
func provisionedEnv(t *testing.T, g *WithT, prefix string) (*toolchainv1alpha1.SpaceRequest, client.ObjectKey, string) {
	t.Helper()
	team := unique(prefix)
	createNamespace(t, g, team)
	sr := newSpaceRequest(team, "env")
	g.Expect(env.Client.Create(context.Background(), sr)).To(Succeed())
	key := client.ObjectKeyFromObject(sr)
	g.Eventually(reason(key)).WithTimeout(timeout).WithPolling(interval).Should(Equal(toolchainv1alpha1.ReasonProvisioned))
	return sr, key, nsName(team, "env")
}

// TestOwnNamespaceDeletionIsNoOrphan: the stub removes a SpaceRequest's
// finalizer once the API server says its namespace is gone, and the
// SpaceRequest's disappearance may be reconciled before the stub's cache of
// namespaces shows even the namespace's deletion. That namespace, which the
// stub deleted itself, is no orphan: no list to confirm the SpaceRequest is
// gone, no second delete, no OrphanedNamespaceDeleted Warning.
func TestOwnNamespaceDeletionIsNoOrphan(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := env.Client
	_, key, provisioned := provisionedEnv(t, g, "team-own-delete")
	g.Eventually(func(g Gomega) bool { return inStubCache(g, namespaceGVK, client.ObjectKey{Name: provisioned}) }).
		WithTimeout(timeout).WithPolling(interval).Should(BeTrue())

	// From here the stub's cache of namespaces stands still: it shows the
	// namespace as provisioned, not terminating, until the end.
	release := holdNamespaceWatch(t)
	start := time.Now()
	g.Expect(c.Delete(ctx, &toolchainv1alpha1.SpaceRequest{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})).To(Succeed())
	ns := &corev1.Namespace{}
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKey{Name: provisioned}, ns)).To(Succeed())
		g.Expect(ns.DeletionTimestamp).NotTo(BeNil())
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed(), "the stub deletes the namespace")
	finalizeNamespace(t, g, provisioned)
	// No namespace event can wake the stub: a change to the SpaceRequest
	// does, and it finds the namespace gone on the API server.
	g.Eventually(func() error {
		sr := &toolchainv1alpha1.SpaceRequest{}
		if err := c.Get(ctx, key, sr); err != nil {
			return err
		}
		base := sr.DeepCopy()
		metav1.SetMetaDataAnnotation(&sr.ObjectMeta, "test.terrace.dev/poke", "1")
		return c.Patch(ctx, sr, client.MergeFrom(base))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	g.Eventually(func() bool { return apierrors.IsNotFound(c.Get(ctx, key, &toolchainv1alpha1.SpaceRequest{})) }).
		WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "the SpaceRequest is released")
	cached := &metav1.PartialObjectMetadata{}
	cached.SetGroupVersionKind(namespaceGVK)
	g.Expect(stub.Managed.Get(ctx, client.ObjectKey{Name: provisioned}, cached)).To(Succeed(),
		"the stub's cache still shows the namespace it deleted")
	g.Expect(cached.DeletionTimestamp).To(BeNil(), "and shows it not terminating")

	confirmations := func() []string {
		var out []string
		for _, r := range stubRequests.since(start) {
			if v := r.verb(); (v == "list" && strings.Contains(r.url.Path, "/namespaces/"+key.Namespace+"/spacerequests")) ||
				(v == "delete" && r.url.Path == "/api/v1/namespaces/"+provisioned) {
				out = append(out, r.String())
			}
		}
		return out
	}
	g.Consistently(confirmations).WithTimeout(consistency).WithPolling(interval).Should(HaveLen(1),
		"one delete of the namespace (terminating the SpaceRequest), no list to confirm the SpaceRequest is gone, no second delete")
	g.Expect(confirmations()[0]).To(HavePrefix("DELETE"))
	release()
	g.Consistently(func(g Gomega) []string { return observabilitytest.Events(g, c, metav1.NamespaceDefault, provisioned) }).
		WithTimeout(consistency).WithPolling(interval).ShouldNot(ContainElement("Warning/" + spacerequest.EventOrphanedNamespaceDeleted))
}

// TestUnableToTerminateQuotesTheNamespacesStatus: a namespace held up by
// what is left in it carries kube-controller-manager's conditions saying
// what (NamespaceContentRemaining, NamespaceFinalizersRemaining);
// UnableToTerminate quotes those that are True (in its message and its
// event) and follows them as they change. envtest has no namespace
// controller: the test writes the conditions (namespaces/status) as it
// would.
func TestUnableToTerminateQuotesTheNamespacesStatus(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := env.Client
	sr, key, provisioned := provisionedEnv(t, g, "team-held-up")
	g.Expect(c.Delete(ctx, sr)).To(Succeed())

	const (
		content    = "Some resources are remaining: configmaps. has 1 resource instances"
		finalizers = "Some content in the namespace has finalizers remaining: example.com/block in 1 resource instances"
		discovered = "All resources successfully discovered"
	)
	setConditions := func(conds ...corev1.NamespaceCondition) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			ns := &corev1.Namespace{}
			g.Expect(c.Get(ctx, client.ObjectKey{Name: provisioned}, ns)).To(Succeed())
			g.Expect(ns.DeletionTimestamp).NotTo(BeNil(), "the stub deleted the namespace")
			ns.Status.Conditions = conds
			g.Expect(c.Status().Update(ctx, ns)).To(Succeed())
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	}
	now := metav1.Now()
	setConditions(
		corev1.NamespaceCondition{Type: corev1.NamespaceDeletionDiscoveryFailure, Status: corev1.ConditionFalse,
			Reason: "ResourcesDiscovered", Message: discovered, LastTransitionTime: now},
		corev1.NamespaceCondition{Type: corev1.NamespaceContentRemaining, Status: corev1.ConditionTrue,
			Reason: "SomeResourcesRemain", Message: content, LastTransitionTime: now},
		corev1.NamespaceCondition{Type: corev1.NamespaceFinalizersRemaining, Status: corev1.ConditionTrue,
			Reason: "SomeFinalizersRemain", Message: finalizers, LastTransitionTime: now},
	)

	g.Eventually(reason(key)).WithTimeout(timeout).WithPolling(interval).Should(Equal(toolchainv1alpha1.ReasonUnableToTerminate))
	g.Eventually(message(key)).WithTimeout(timeout).WithPolling(interval).Should(SatisfyAll(
		ContainSubstring(provisioned+" is still there"),
		ContainSubstring(string(corev1.NamespaceContentRemaining)+": "+content),
		ContainSubstring(string(corev1.NamespaceFinalizersRemaining)+": "+finalizers),
		Not(ContainSubstring(discovered))), "the True conditions are quoted; a False one says nothing is wrong")
	warnings := func(g Gomega) []string {
		list := &eventsv1.EventList{}
		g.Expect(c.List(ctx, list, client.InNamespace(sr.Namespace))).To(Succeed())
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.Name == key.Name && e.Reason == spacerequest.EventUnableToTerminate {
				notes = append(notes, e.Note)
			}
		}
		return notes
	}
	g.Eventually(warnings).WithTimeout(timeout).WithPolling(interval).Should(ContainElement(ContainSubstring(finalizers)))

	// The content is gone, its finalizer's object still there: the message
	// follows the namespace's status.
	setConditions(
		corev1.NamespaceCondition{Type: corev1.NamespaceContentRemaining, Status: corev1.ConditionFalse,
			Reason: "ContentDeleted", Message: "All content successfully deleted, may be waiting on finalization", LastTransitionTime: now},
		corev1.NamespaceCondition{Type: corev1.NamespaceFinalizersRemaining, Status: corev1.ConditionTrue,
			Reason: "SomeFinalizersRemain", Message: finalizers, LastTransitionTime: now},
	)
	g.Eventually(message(key)).WithTimeout(timeout).WithPolling(interval).Should(SatisfyAll(
		ContainSubstring(string(corev1.NamespaceFinalizersRemaining)+": "+finalizers),
		Not(ContainSubstring(string(corev1.NamespaceContentRemaining)))))
	g.Expect(reason(key)(g)).To(Equal(toolchainv1alpha1.ReasonUnableToTerminate))

	// A namespace holding many finalizers: the quote is cut, so that the
	// event's note stays within what the API server accepts (1 KiB), and
	// the event is still recorded.
	many := "Some content in the namespace has finalizers remaining: " + strings.Repeat("example.com/a-rather-long-finalizer-name ", 40)
	setConditions(corev1.NamespaceCondition{Type: corev1.NamespaceFinalizersRemaining, Status: corev1.ConditionTrue,
		Reason: "SomeFinalizersRemain", Message: many, LastTransitionTime: now})
	g.Eventually(message(key)).WithTimeout(timeout).WithPolling(interval).Should(SatisfyAll(
		ContainSubstring(many[:200]), HaveSuffix("…"), WithTransform(func(s string) int { return len(s) }, BeNumerically("<=", 1024))))
	g.Eventually(warnings).WithTimeout(timeout).WithPolling(interval).Should(ContainElement(ContainSubstring(many[:200])))

	finalizeNamespace(t, g, provisioned)
	g.Eventually(func() bool { return apierrors.IsNotFound(c.Get(ctx, key, &toolchainv1alpha1.SpaceRequest{})) }).
		WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
}
