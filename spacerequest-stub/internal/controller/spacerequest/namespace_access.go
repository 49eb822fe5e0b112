package spacerequest

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terrace-dev/terrace/kit/flow"
)

func (r *Reconciler) applyServiceAccount(ctx context.Context, s *scope) (flow.Result, error) {
	ns := NamespaceName(s.sr)
	// The namespace is the stub's (applyNamespace): a ServiceAccount of this
	// name in it that Managed does not hold (unlabelled) is applied over, as
	// one that does but lacks the stub's metadata. Only who has rights in the
	// namespace could have made it, and those rights come from the stub.
	existing := metadataOf(serviceAccountGVK)
	err := r.Managed.Get(ctx, client.ObjectKey{Namespace: ns, Name: ServiceAccountName}, existing)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return flow.Continue(), fmt.Errorf("reading ServiceAccount %s/%s: %w", ns, ServiceAccountName, err)
	case existing.DeletionTimestamp.IsZero() && existing.UID != "" &&
		existing.Labels[ManagedByLabel] == ManagedByValue && existing.Annotations[SpaceRequestAnnotation] == Key(s.sr):
		// Labels and annotations are all the stub applies: nothing to do.
		s.serviceAccountUID = existing.UID
		return flow.Continue(), nil
	}
	sa := corev1ac.ServiceAccount(ServiceAccountName, ns).
		WithLabels(map[string]string{ManagedByLabel: ManagedByValue}).
		WithAnnotations(map[string]string{SpaceRequestAnnotation: Key(s.sr)})
	if err := r.apply(ctx, "ApplyServiceAccount", ns, sa); err != nil {
		return flow.Continue(), fmt.Errorf("applying ServiceAccount %s/%s: %w", ns, ServiceAccountName, err)
	}
	s.serviceAccountUID = ptr.Deref(sa.UID, "")
	if s.serviceAccountUID == "" {
		return flow.Continue(), fmt.Errorf("applying ServiceAccount %s/%s: the API server returned no UID", ns, ServiceAccountName)
	}
	return flow.Continue(), nil
}

func (r *Reconciler) applyRoleBinding(ctx context.Context, s *scope) (flow.Result, error) {
	ns := NamespaceName(s.sr)
	// In the stub's namespace, like the ServiceAccount: one that Managed does
	// not hold is applied over.
	existing := metadataOf(roleBindingGVK)
	err := r.Managed.Get(ctx, client.ObjectKey{Namespace: ns, Name: RoleBindingName}, existing)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return flow.Continue(), fmt.Errorf("reading RoleBinding %s/%s: %w", ns, RoleBindingName, err)
	case existing.DeletionTimestamp.IsZero() && r.isKnown(roleBindingKey(ns), existing.ResourceVersion):
		// Unchanged since the stub applied it.
		return flow.Continue(), nil
	}
	rb := rbacv1ac.RoleBinding(RoleBindingName, ns).
		WithLabels(map[string]string{ManagedByLabel: ManagedByValue}).
		WithAnnotations(map[string]string{SpaceRequestAnnotation: Key(s.sr)}).
		WithRoleRef(rbacv1ac.RoleRef().
			WithAPIGroup(rbacv1.GroupName).
			WithKind("ClusterRole").
			WithName(EditClusterRole)).
		WithSubjects(rbacv1ac.Subject().
			WithKind(rbacv1.ServiceAccountKind).
			WithName(ServiceAccountName).
			WithNamespace(ns))
	if err := r.apply(ctx, "ApplyRoleBinding", ns, rb); err != nil {
		return flow.Continue(), fmt.Errorf("applying RoleBinding %s/%s: %w", ns, RoleBindingName, err)
	}
	r.remember(roleBindingKey(ns), ptr.Deref(rb.ResourceVersion, ""))
	return flow.Continue(), nil
}
