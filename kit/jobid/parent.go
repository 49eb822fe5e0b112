package jobid

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// ParentGone reports whether the installation that controls child (a
// sub-installation or an execution) will never hand it a deletion job: there
// is no such installation, it is gone (or replaced by a namesake), or it is
// being deleted without its finalizer, so its own deletion job never runs
// (the finalizer was removed by hand, or it was deleted before its first job
// added it). A deleted child then runs a deletion job of its own, as a root
// does, or its finalizer would never go. reader is the caller's: its cache
// (the parent existed before the child, and its informer shows the parent's
// deletion before the garbage collector's deletion of the child) or, for a
// controller that caches no installations, the API server.
func ParentGone(ctx context.Context, reader client.Reader, child client.Object) (bool, error) {
	ref := metav1.GetControllerOf(child)
	if ref == nil || ref.Kind != "Installation" || !strings.HasPrefix(ref.APIVersion, lsv1alpha1.GroupName+"/") {
		return true, nil
	}
	parent := &lsv1alpha1.Installation{}
	if err := reader.Get(ctx, client.ObjectKey{Namespace: child.GetNamespace(), Name: ref.Name}, parent); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("reading parent installation %s: %w", ref.Name, err)
	}
	if parent.UID != ref.UID {
		return true, nil
	}
	return parent.DeletionTimestamp != nil && !controllerutil.ContainsFinalizer(parent, lsv1alpha1.Finalizer), nil
}
