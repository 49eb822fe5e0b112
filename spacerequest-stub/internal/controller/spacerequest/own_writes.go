package spacerequest

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// remember records that the object named key is, at resourceVersion rv,
// what the stub wrote.
func (r *Reconciler) remember(key, rv string) {
	if rv != "" {
		r.written.Store(key, rv)
	}
}

// tracked reports whether the stub remembers the object named key: it wrote
// it, or found it was someone else's (remembered with no resourceVersion).
func (r *Reconciler) tracked(key string) bool {
	_, ok := r.written.Load(key)
	return ok
}

// isKnown reports whether rv is the resourceVersion remembered for key.
func (r *Reconciler) isKnown(key, rv string) bool {
	v, ok := r.written.Load(key)
	return ok && rv != "" && v.(string) == rv
}

// forget drops what the reconciler keeps about a SpaceRequest that is gone.
func (r *Reconciler) forget(key types.NamespacedName) {
	phases.Forget(key.Namespace, key.Name)
	r.ownWrites.Forget(key)
	r.outcomes.Forget(key)
	sr := &toolchainv1alpha1.SpaceRequest{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	r.written.Delete(secretKey(key.Namespace, SecretName(sr)))
	r.written.Delete(roleBindingKey(NamespaceName(sr)))
	r.written.Delete(resourceQuotaGVK.Kind + "/" + NamespaceName(sr) + "/" + ResourceQuotaName)
	r.written.Delete(limitRangeGVK.Kind + "/" + NamespaceName(sr) + "/" + LimitRangeName)
	r.unseen.forget(secretKey(key.Namespace, SecretName(sr)))
	r.unseen.forget(namespaceKey(NamespaceName(sr)))
}

func secretKey(namespace, name string) string { return "secret/" + namespace + "/" + name }

func roleBindingKey(namespace string) string {
	return "rolebinding/" + namespace + "/" + RoleBindingName
}

// apply is a server-side apply of the stub's field manager, as the child
// span "SpaceRequest.<step>".
func (r *Reconciler) apply(ctx context.Context, step, namespace string, obj runtime.ApplyConfiguration) error {
	ctx, span := tracing.StartStep(ctx, tracer(), Kind, step, attrNamespace.String(namespace))
	err := r.Client.Apply(ctx, obj, client.FieldOwner(FieldManager), client.ForceOwnership)
	tracing.EndStep(span, err)
	return err
}

// create creates obj with the stub's field manager, as the child span
// "SpaceRequest.<step>". Unlike an apply it fails (AlreadyExists) on an
// object that exists, so it never takes over one that Managed does not hold
// (someone else's, or the stub's own without its label or not cached yet).
// An AlreadyExists ends the span without an error: the caller decides.
func (r *Reconciler) create(ctx context.Context, step, namespace string, obj client.Object) error {
	ctx, span := tracing.StartStep(ctx, tracer(), Kind, step, attrNamespace.String(namespace))
	err := r.Client.Create(ctx, obj, client.FieldOwner(FieldManager))
	if apierrors.IsAlreadyExists(err) {
		span.AddEvent("already exists")
		tracing.EndStep(span, nil)
		return err
	}
	tracing.EndStep(span, err)
	return err
}

// readLive reads the metadata of an object that Managed does not hold (a
// create found it exists) from the API server. It exists, so NotFound only
// means it went in between: a conflict, retried quietly.
func (r *Reconciler) readLive(ctx context.Context, key client.ObjectKey, into *metav1.PartialObjectMetadata) error {
	err := r.APIReader.Get(ctx, key, into)
	if apierrors.IsNotFound(err) {
		return apierrors.NewConflict(schema.GroupResource{Resource: into.Kind}, key.Name,
			errors.New("it existed a moment ago and is gone now"))
	}
	return err
}
