package installation

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
)

// ReasonOverwritesNotFound: the installation's Context names a
// ComponentVersionOverwrites object (componentVersionOverwrites) that does
// not exist in its namespace.
const ReasonOverwritesNotFound = "ComponentVersionOverwritesNotFound"

// componentOverwrites reads the overwrites of the ComponentVersionOverwrites
// object the Context names; none when it names none. The object is read
// from the cache, so every job reads its latest state without a request.
func (r *Reconciler) componentOverwrites(ctx context.Context, c *lsv1alpha1.Context) ([]lsv1alpha1.ComponentVersionOverwrite, error) {
	name := c.ComponentVersionOverwrites
	if name == "" {
		return nil, nil
	}
	key := client.ObjectKey{Namespace: c.Namespace, Name: name}
	obj := &lsv1alpha1.ComponentVersionOverwrites{}
	err := r.Client.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		// An object created just before the installation may not have
		// reached the cache yet: the API server has the last word.
		err = r.APIReader.Get(ctx, key, obj)
	}
	if err == nil {
		return obj.Overwrites, nil
	}
	if apierrors.IsNotFound(err) {
		return nil, flow.Stalledf(ReasonOverwritesNotFound,
			"ComponentVersionOverwrites %s/%s (componentVersionOverwrites of Context %s) does not exist", c.Namespace, name, c.Name)
	}
	return nil, fmt.Errorf("ComponentVersionOverwrites %s/%s (componentVersionOverwrites of Context %s): %w", c.Namespace, name, c.Name, err)
}
