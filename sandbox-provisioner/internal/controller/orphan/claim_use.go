package orphan

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/sandbox"
)

// claimUse is whether the claim an object was made for may still use it.
type claimUse int

const (
	// claimUses: the claim exists, is not being deleted, is the claim
	// object the object was made for, and names no other target.
	claimUses claimUse = iota
	// claimGone: the claim is gone, being deleted, or another claim object
	// of the same name.
	claimGone
	// claimRedirected: the claim lives on, but its spec.targetName names
	// another target; the binder binds it to that one only, and the
	// provisioner makes nothing more for it (sandbox.NamesOtherTarget).
	claimRedirected
)

func (u claimUse) String() string {
	switch u {
	case claimUses:
		return "uses"
	case claimRedirected:
		return "namesOtherTarget"
	default:
		return "gone"
	}
}

// claimUseOf reads the claim named name and says whether the object named
// objectName, made for it, is still of use to it (the name carries the
// claim's UID: a claim created again under the same name is another claim).
func claimUseOf(ctx context.Context, reader client.Reader, namespace, name, objectName string) (claimUse, error) {
	claim := &appstudiov1alpha1.DeploymentTargetClaim{}
	err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, claim)
	if apierrors.IsNotFound(err) {
		return claimGone, nil
	}
	if err != nil {
		return claimGone, fmt.Errorf("reading DeploymentTargetClaim %s: %w", name, err)
	}
	switch {
	case !claim.DeletionTimestamp.IsZero() || sandbox.ObjectName(claim) != objectName:
		return claimGone, nil
	case sandbox.NamesOtherTarget(claim):
		return claimRedirected, nil
	default:
		return claimUses, nil
	}
}

// checkClaim stops if the SpaceRequest's claim still exists, is not being
// deleted, is the claim the SpaceRequest was made for, and names no other
// target.
func (r *Reconciler) checkClaim(reader client.Reader) step {
	return func(ctx context.Context, s *scope) (flow.Result, error) {
		use, err := claimUseOf(ctx, reader, s.sr.Namespace, appstudiov1alpha1.ClaimOf(s.sr), s.sr.Name)
		s.claim = use
		if err == nil && use == claimUses {
			return flow.Stop(), nil
		}
		return flow.Continue(), err
	}
}
