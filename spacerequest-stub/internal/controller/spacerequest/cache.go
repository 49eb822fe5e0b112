package spacerequest

import (
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The kinds the stub creates, watched and cached as metadata only.
var (
	namespaceGVK      = corev1.SchemeGroupVersion.WithKind("Namespace")
	serviceAccountGVK = corev1.SchemeGroupVersion.WithKind("ServiceAccount")
	roleBindingGVK    = rbacv1.SchemeGroupVersion.WithKind("RoleBinding")
	secretGVK         = corev1.SchemeGroupVersion.WithKind("Secret")
	resourceQuotaGVK  = corev1.SchemeGroupVersion.WithKind("ResourceQuota")
	limitRangeGVK     = corev1.SchemeGroupVersion.WithKind("LimitRange")
)

// lastAppliedAnnotation is kubectl's client-side apply annotation: on a
// Secret applied with kubectl it holds the whole Secret.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// metadataOf is an empty metadata-only object of kind gvk.
func metadataOf(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	o := &metav1.PartialObjectMetadata{}
	o.SetGroupVersionKind(gvk)
	return o
}

// ManagedCacheOptions are the options of the cache the reconciler's Managed
// field needs: the metadata of namespaces, ServiceAccounts, RoleBindings,
// ResourceQuotas, LimitRanges and Secrets carrying ManagedByLabel (the API server filters, so nothing else is
// listed, sent or held in memory, however many such objects the cluster
// has), and of ServiceAccounts, RoleBindings, ResourceQuotas and
// LimitRanges only the one name the stub uses (their RBAC is restricted to that name, which a list or watch
// satisfies only with a field selector on metadata.name). Objects are cached
// without managedFields and without kubectl's last-applied-configuration
// annotation; the stub reads neither. The caller sets Scheme, Mapper and
// HTTPClient.
func ManagedCacheOptions() cache.Options {
	managed := labels.SelectorFromSet(labels.Set{ManagedByLabel: ManagedByValue})
	return cache.Options{
		// Also for any kind read through this cache later.
		DefaultLabelSelector: managed,
		DefaultTransform:     stripUnread,
		ByObject: map[client.Object]cache.ByObject{
			metadataOf(namespaceGVK): {Label: managed},
			metadataOf(secretGVK):    {Label: managed},
			metadataOf(serviceAccountGVK): {
				Label: managed,
				Field: fields.OneTermEqualSelector("metadata.name", ServiceAccountName),
			},
			metadataOf(roleBindingGVK): {
				Label: managed,
				Field: fields.OneTermEqualSelector("metadata.name", RoleBindingName),
			},
			metadataOf(resourceQuotaGVK): {
				Label: managed,
				Field: fields.OneTermEqualSelector("metadata.name", ResourceQuotaName),
			},
			metadataOf(limitRangeGVK): {
				Label: managed,
				Field: fields.OneTermEqualSelector("metadata.name", LimitRangeName),
			},
		},
	}
}

// stripUnread drops what the stub never reads from an object before it is
// cached.
var stripUnread toolscache.TransformFunc = func(in any) (any, error) {
	obj, err := meta.Accessor(in)
	if err != nil {
		return in, nil //nolint:nilerr // not an object: cached as it is
	}
	if obj.GetManagedFields() != nil {
		obj.SetManagedFields(nil)
	}
	if a := obj.GetAnnotations(); a != nil {
		if _, ok := a[lastAppliedAnnotation]; ok {
			delete(a, lastAppliedAnnotation)
			obj.SetAnnotations(a)
		}
	}
	return in, nil
}
