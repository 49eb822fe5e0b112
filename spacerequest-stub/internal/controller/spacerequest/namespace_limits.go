package spacerequest

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
)

// Flags of the ceilings, named in the message of a SpaceRequest that asks for
// more.
const (
	FlagMaxNamespaceCPU     = "max-namespace-cpu"
	FlagMaxNamespaceMemory  = "max-namespace-memory"
	FlagMaxNamespacePods    = "max-namespace-pods"
	FlagMaxNamespaceStorage = "max-namespace-storage"
)

// Ceilings bound the quota a SpaceRequest may ask for in its
// NamespaceLimitsAnnotation. Whoever may write SpaceRequests may write that
// annotation; the ceilings are the operator's word on how much one namespace
// may ever get. The container defaults need no ceiling of their own: they
// cannot exceed the quota (NamespaceLimits.Validate).
type Ceilings struct {
	CPU, Memory, Pods, Storage resource.Quantity
}

// DefaultCeilings: 16 CPUs, 64Gi of memory, 200 pods, 500Gi of storage.
func DefaultCeilings() Ceilings {
	return Ceilings{CPU: resource.MustParse("16"), Memory: resource.MustParse("64Gi"),
		Pods: resource.MustParse("200"), Storage: resource.MustParse("500Gi")}
}

// check reports each size of l over its ceiling, naming the ceiling's flag.
func (c Ceilings) check(l toolchainv1alpha1.NamespaceLimits) error {
	var errs []error
	for _, b := range []struct {
		name, flag string
		asked      *resource.Quantity
		ceiling    resource.Quantity
	}{
		{"cpu", FlagMaxNamespaceCPU, l.CPU, c.CPU},
		{"memory", FlagMaxNamespaceMemory, l.Memory, c.Memory},
		{"pods", FlagMaxNamespacePods, l.Pods, c.Pods},
		{"storage", FlagMaxNamespaceStorage, l.Storage, c.Storage},
	} {
		if b.asked.Cmp(b.ceiling) > 0 {
			errs = append(errs, fmt.Errorf("%s %s is more than the stub allows (--%s=%s)", b.name, b.asked.String(), b.flag, b.ceiling.String()))
		}
	}
	return errors.Join(errs...)
}

// loadNamespaceLimits reads the sizes of the namespace's ResourceQuota and
// LimitRange from the SpaceRequest's annotation (DefaultNamespaceLimits
// without one). Sizes that do not parse, cannot work or exceed the ceilings
// stop provisioning before anything is created: Ready=False, Provisioning,
// saying why, and an InvalidNamespaceLimits Warning once per message; the
// SpaceRequest's next change brings it back.
func (r *Reconciler) loadNamespaceLimits(_ context.Context, s *scope) (flow.Result, error) {
	limits := toolchainv1alpha1.DefaultNamespaceLimits()
	var err error
	if value, ok := s.sr.Annotations[toolchainv1alpha1.NamespaceLimitsAnnotation]; ok {
		limits, err = toolchainv1alpha1.ParseNamespaceLimits(value)
	}
	if err == nil {
		err = r.Ceilings.check(limits)
	}
	if err == nil {
		s.limits = limits
		return flow.Continue(), nil
	}
	msg := fmt.Sprintf("Annotation %s does not give usable namespace limits: %v", toolchainv1alpha1.NamespaceLimitsAnnotation, err)
	if !conditionMessageIs(s.sr, msg) {
		r.Recorder.Eventf(s.sr, nil, corev1.EventTypeWarning, EventInvalidNamespaceLimits, "Provision", "%s", msg)
	}
	r.setReady(s.sr, metav1.ConditionFalse, toolchainv1alpha1.ReasonProvisioning, msg)
	return flow.Stop(), nil
}

// applyNamespaceLimits applies the namespace's ResourceQuota and LimitRange
// before any credentials are handed out. Like the RoleBinding, each is cached
// as metadata only: the stub remembers the resourceVersion of its last apply
// together with a digest of the limits it applied, so a cached copy at that
// version, made from the same limits, needs no write.
func (r *Reconciler) applyNamespaceLimits(ctx context.Context, s *scope) (flow.Result, error) {
	ns := NamespaceName(s.sr)
	digest := hashOf(s.limits.String())
	quota := corev1ac.ResourceQuota(ResourceQuotaName, ns).
		WithLabels(map[string]string{ManagedByLabel: ManagedByValue}).
		WithAnnotations(map[string]string{SpaceRequestAnnotation: Key(s.sr)}).
		WithSpec(corev1ac.ResourceQuotaSpec().WithHard(quotaHard(s.limits)))
	if err := r.applyRemembered(ctx, "ApplyResourceQuota", resourceQuotaGVK, ns, ResourceQuotaName, digest, quota,
		func() *string { return quota.ResourceVersion }); err != nil {
		return flow.Continue(), err
	}
	limitRange := corev1ac.LimitRange(LimitRangeName, ns).
		WithLabels(map[string]string{ManagedByLabel: ManagedByValue}).
		WithAnnotations(map[string]string{SpaceRequestAnnotation: Key(s.sr)}).
		WithSpec(corev1ac.LimitRangeSpec().WithLimits(corev1ac.LimitRangeItem().
			WithType(corev1.LimitTypeContainer).
			WithDefault(corev1.ResourceList{corev1.ResourceCPU: *s.limits.ContainerCPU, corev1.ResourceMemory: *s.limits.ContainerMemory}).
			WithDefaultRequest(corev1.ResourceList{corev1.ResourceCPU: *s.limits.ContainerCPURequest, corev1.ResourceMemory: *s.limits.ContainerMemoryRequest})))
	if err := r.applyRemembered(ctx, "ApplyLimitRange", limitRangeGVK, ns, LimitRangeName, digest, limitRange,
		func() *string { return limitRange.ResourceVersion }); err != nil {
		return flow.Continue(), err
	}
	return flow.Continue(), nil
}

// quotaHard is the ResourceQuota's spec.hard for l.
func quotaHard(l toolchainv1alpha1.NamespaceLimits) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceRequestsCPU:     *l.CPU,
		corev1.ResourceLimitsCPU:       *l.CPU,
		corev1.ResourceRequestsMemory:  *l.Memory,
		corev1.ResourceLimitsMemory:    *l.Memory,
		corev1.ResourcePods:            *l.Pods,
		corev1.ResourceRequestsStorage: *l.Storage,
	}
}

// applyRemembered applies obj (of kind gvk, named name in namespace ns)
// unless Managed holds it at the version the stub remembers having written
// from the same digest; rv reads the resourceVersion the apply returned.
func (r *Reconciler) applyRemembered(ctx context.Context, step string, gvk schema.GroupVersionKind, ns, name, digest string,
	obj runtime.ApplyConfiguration, rv func() *string) error {
	key := gvk.Kind + "/" + ns + "/" + name
	existing := metadataOf(gvk)
	err := r.Managed.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, existing)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading %s %s/%s: %w", gvk.Kind, ns, name, err)
	case existing.DeletionTimestamp.IsZero() && r.isKnown(key, writtenVersion(existing.ResourceVersion, digest)):
		// Unchanged since the stub applied it, from the same limits.
		return nil
	}
	if err := r.apply(ctx, step, ns, obj); err != nil {
		return fmt.Errorf("applying %s %s/%s: %w", gvk.Kind, ns, name, err)
	}
	if v := rv(); v != nil {
		r.remember(key, writtenVersion(*v, digest))
	}
	return nil
}

// writtenVersion is what the stub remembers of an object it wrote from
// something a digest stands for: "" for no resourceVersion.
func writtenVersion(resourceVersion, digest string) string {
	if resourceVersion == "" {
		return ""
	}
	return resourceVersion + "#" + digest
}
