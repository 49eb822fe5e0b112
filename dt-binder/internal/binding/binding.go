// Package binding holds what the claim and the target reconcilers of the
// dt-binder must agree on: the field indexes both read, and the rules that
// decide which target a claim is bound to. Both reconcilers compute the binding
// from the same cached objects with the same functions, so that they never
// disagree about which of several targets naming one claim is "the" target.
package binding

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
)

// FieldOwner is the field manager of every write the binder makes, so that
// `kubectl get --show-managed-fields` tells the binder's fields from the
// provisioner's and the user's.
const FieldOwner = "dt-binder"

// RecordedClaimUID returns the UID t's ClaimAnnotation records for the claim
// its claimRef names, or "" when there is no such record (no annotation, a
// malformed one, or one written for another claim name).
func RecordedClaimUID(t *appstudiov1alpha1.DeploymentTarget) string {
	if t.Spec.ClaimRef == nil || t.Spec.ClaimRef.Name == "" {
		return ""
	}
	name, uid, ok := strings.Cut(t.Annotations[appstudiov1alpha1.ClaimAnnotation], "/")
	if !ok || name != t.Spec.ClaimRef.Name {
		return ""
	}
	return uid
}

// ForEarlierClaim says whether t's claimRef names claim's name but was
// written for another claim object of that name (recorded UID differs): that
// claim is gone, and claim, a new object, does not inherit t. Like a
// PersistentVolume bound to a claim UID that no longer exists, t is Released
// (target reconciler) and its class's reclaim policy is applied for the old
// claim (claim reconciler).
func ForEarlierClaim(t *appstudiov1alpha1.DeploymentTarget, claim *appstudiov1alpha1.DeploymentTargetClaim) bool {
	if t.Spec.ClaimRef == nil || t.Spec.ClaimRef.Name != claim.Name || t.Namespace != claim.Namespace || claim.UID == "" {
		return false
	}
	uid := RecordedClaimUID(t)
	return uid != "" && uid != string(claim.UID)
}

// Field indexes on the manager's cache. The reconcilers look targets and
// claims up through them instead of listing everything in a namespace.
const (
	// TargetClaimIndex indexes DeploymentTargets by spec.claimRef.name.
	TargetClaimIndex = "spec.claimRef.name"
	// TargetClassIndex indexes DeploymentTargets by spec.deploymentTargetClassName.
	TargetClassIndex = "spec.deploymentTargetClassName"
	// TargetSpaceRequestIndex indexes DeploymentTargets by the SpaceRequest
	// their provisioner named in the spacerequest annotation.
	TargetSpaceRequestIndex = "metadata.annotations.spacerequest"
	// ClaimTargetIndex indexes DeploymentTargetClaims by spec.targetName.
	ClaimTargetIndex = "spec.targetName"
	// ClaimClassIndex indexes DeploymentTargetClaims by spec.deploymentTargetClassName.
	ClaimClassIndex = "spec.deploymentTargetClassName"
)

// SetupIndexes registers the field indexes. It must run once per manager,
// before the reconcilers start (an index registered twice is an error).
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	indexes := []struct {
		obj   client.Object
		field string
		fn    client.IndexerFunc
	}{
		{&appstudiov1alpha1.DeploymentTarget{}, TargetClaimIndex, func(o client.Object) []string {
			dt := o.(*appstudiov1alpha1.DeploymentTarget)
			if dt.Spec.ClaimRef == nil || dt.Spec.ClaimRef.Name == "" {
				return nil
			}
			return []string{dt.Spec.ClaimRef.Name}
		}},
		{&appstudiov1alpha1.DeploymentTarget{}, TargetClassIndex, func(o client.Object) []string {
			return []string{o.(*appstudiov1alpha1.DeploymentTarget).Spec.DeploymentTargetClassName}
		}},
		{&appstudiov1alpha1.DeploymentTarget{}, TargetSpaceRequestIndex, func(o client.Object) []string {
			if n := o.GetAnnotations()[appstudiov1alpha1.SpaceRequestAnnotation]; n != "" {
				return []string{n}
			}
			return nil
		}},
		{&appstudiov1alpha1.DeploymentTargetClaim{}, ClaimTargetIndex, func(o client.Object) []string {
			if n := o.(*appstudiov1alpha1.DeploymentTargetClaim).Spec.TargetName; n != "" {
				return []string{n}
			}
			return nil
		}},
		{&appstudiov1alpha1.DeploymentTargetClaim{}, ClaimClassIndex, func(o client.Object) []string {
			return []string{o.(*appstudiov1alpha1.DeploymentTargetClaim).Spec.DeploymentTargetClassName}
		}},
	}
	for _, ix := range indexes {
		if err := indexer.IndexField(ctx, ix.obj, ix.field, ix.fn); err != nil {
			return fmt.Errorf("indexing %T by %s: %w", ix.obj, ix.field, err)
		}
	}
	return nil
}

// TargetsNamingClaim returns the cached targets in namespace whose claimRef
// names claimName.
func TargetsNamingClaim(ctx context.Context, c client.Reader, namespace, claimName string) ([]appstudiov1alpha1.DeploymentTarget, error) {
	var list appstudiov1alpha1.DeploymentTargetList
	if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{TargetClaimIndex: claimName}); err != nil {
		return nil, fmt.Errorf("listing targets naming claim %s/%s: %w", namespace, claimName, err)
	}
	return list.Items, nil
}

// BoundTarget returns, among the targets whose claimRef names claim, the one
// the claim is bound (or being bound) to, or nil.
//
// Normally there is at most one. Should a user or a faulty provisioner make two
// targets name one claim, the choice must be the same in both reconcilers and
// stable over time, so that a claim never flips between targets: a target that
// already reports Bound wins, then one not being deleted, then the oldest, then
// the name. A target of another class, a Released one, or another target than
// the claim's spec.targetName, is never chosen.
func BoundTarget(claim *appstudiov1alpha1.DeploymentTargetClaim, targets []appstudiov1alpha1.DeploymentTarget) *appstudiov1alpha1.DeploymentTarget {
	return pick(claim, targets, func(t *appstudiov1alpha1.DeploymentTarget) bool {
		return t.Spec.DeploymentTargetClassName == claim.Spec.DeploymentTargetClassName &&
			(claim.Spec.TargetName == "" || t.Name == claim.Spec.TargetName)
	})
}

// HeldTarget is the target the claim holds (or is being bound to), whatever its spec.targetName and
// spec.deploymentTargetClassName say now (a user may change either after
// binding; the binder never binds a second target, see the claim
// reconciler). A target of the claim's class naming it is held, as is one of
// another class that the claim was bound to (heldUnderItsClass): a class
// change does not let go of it. A target of another class that merely names
// the claim (pre-bound by a user, never bound) is not held. The binder
// never reclaims what it never bound: the claim's deletion applies a
// reclaim policy only to a held target it holds by a durable fact
// (ReclaimedTarget), not to one of its class that merely names it.
func HeldTarget(claim *appstudiov1alpha1.DeploymentTargetClaim, targets []appstudiov1alpha1.DeploymentTarget) *appstudiov1alpha1.DeploymentTarget {
	return pick(claim, targets, func(t *appstudiov1alpha1.DeploymentTarget) bool { return held(claim, t) })
}

// ReclaimedTarget is the target whose class's reclaimPolicy the claim's
// deletion applies, or nil: of the targets the claim holds (as HeldTarget
// chooses them), only one it holds by a durable fact (HeldByFact). A
// target that merely names the claim in its claimRef (pre-bound by a user,
// and the claim was deleted before it bound it, or it names another target
// in spec.targetName) was never bound by the claim, and the binder never
// reclaims what it never bound: as a pre-bound PersistentVolume whose
// claimRef has no UID, it is left reserved for the claim's name (the target
// reconciler reports it Pending, ClaimNotFound, once the claim is gone).
func ReclaimedTarget(claim *appstudiov1alpha1.DeploymentTargetClaim, targets []appstudiov1alpha1.DeploymentTarget) *appstudiov1alpha1.DeploymentTarget {
	return pick(claim, targets, func(t *appstudiov1alpha1.DeploymentTarget) bool {
		return held(claim, t) && HeldByFact(claim, t)
	})
}

// HeldByFact says whether claim holds t (which names it) by a durable fact:
// t records this claim object (ClaimAnnotation: the binder's claimRef write,
// its record on a target pre-bound to the claim when the claim binds it, or
// the provisioner's create), or the claim recorded that it bound
// (bind-complete; a target bound before the binder wrote the record has
// none). A target that only names the claim by name has neither.
func HeldByFact(claim *appstudiov1alpha1.DeploymentTargetClaim, t *appstudiov1alpha1.DeploymentTarget) bool {
	if claim.UID != "" && RecordedClaimUID(t) == string(claim.UID) {
		return true
	}
	return BindComplete(claim)
}

// held: t, naming claim, is the claim's whatever the claim's spec says now
// (see HeldTarget).
func held(claim *appstudiov1alpha1.DeploymentTargetClaim, t *appstudiov1alpha1.DeploymentTarget) bool {
	return t.Spec.DeploymentTargetClassName == claim.Spec.DeploymentTargetClassName || heldUnderItsClass(claim, t)
}

// heldUnderItsClass: t names claim in its claimRef and was bound to it, so it
// stays the claim's whatever class (or spec.targetName) the claim names now.
// The claim must have recorded a binding (bind-complete): a new claim of the
// same name (the old one's finalizer removed by hand, recreated with another
// class before the target turned Released) never bound this target.
//
// Held is decided from durable facts, never from the target's own Bound
// condition, which the target reconciler flips as the claim's spec changes
// (a spec.targetName change turned it False, and a class change written
// after that then let go of the target and bound a second one). A target
// recording its claim object (ClaimAnnotation, written by the binder in its
// claimRef write, or on a target pre-bound by a user when the claim binds it,
// and by the provisioner in the target's create) is held by the
// bind-complete claim whose UID it records (NamesClaim has already refused a
// record of another UID). Only a target without the record (bound before the
// binder wrote it) keeps the older rule:
// its Bound condition is True, or the claim's spec.targetName names it. A
// Released target is never held: it was let go by an earlier claim of the
// same name.
func heldUnderItsClass(claim *appstudiov1alpha1.DeploymentTargetClaim, t *appstudiov1alpha1.DeploymentTarget) bool {
	if !NamesClaim(t, claim) || t.Status.Phase == appstudiov1alpha1.DeploymentTargetPhaseReleased {
		return false
	}
	if !BindComplete(claim) {
		return false
	}
	if uid := RecordedClaimUID(t); uid != "" {
		return uid == string(claim.UID)
	}
	return meta.IsStatusConditionTrue(t.Status.Conditions, appstudiov1alpha1.ConditionBound) || claim.Spec.TargetName == t.Name
}

// BindComplete: the claim recorded that it bound a target (the
// bind-complete annotation).
func BindComplete(claim *appstudiov1alpha1.DeploymentTargetClaim) bool {
	return claim.Annotations[appstudiov1alpha1.BindCompleteAnnotation] == appstudiov1alpha1.AnnotationTrue
}

// NamesClaim: t's claimRef names claim, and was not written for an earlier
// claim object of the same name (ForEarlierClaim).
func NamesClaim(t *appstudiov1alpha1.DeploymentTarget, claim *appstudiov1alpha1.DeploymentTargetClaim) bool {
	return t.Spec.ClaimRef != nil && t.Spec.ClaimRef.Name == claim.Name && t.Namespace == claim.Namespace &&
		!ForEarlierClaim(t, claim)
}

// pick returns the best of the targets naming claim that are not Released
// and pass eligible (see BoundTarget for the order).
func pick(claim *appstudiov1alpha1.DeploymentTargetClaim, targets []appstudiov1alpha1.DeploymentTarget, eligible func(*appstudiov1alpha1.DeploymentTarget) bool) *appstudiov1alpha1.DeploymentTarget {
	var found []*appstudiov1alpha1.DeploymentTarget
	for i := range targets {
		t := &targets[i]
		if !NamesClaim(t, claim) {
			continue
		}
		if t.Status.Phase == appstudiov1alpha1.DeploymentTargetPhaseReleased {
			// Released by an earlier claim of the same name: a new claim
			// does not inherit it.
			continue
		}
		if !eligible(t) {
			continue
		}
		found = append(found, t)
	}
	if len(found) == 0 {
		return nil
	}
	slices.SortFunc(found, func(a, b *appstudiov1alpha1.DeploymentTarget) int {
		if ab, bb := isBound(a), isBound(b); ab != bb {
			if ab {
				return -1
			}
			return 1
		}
		if ad, bd := a.DeletionTimestamp != nil, b.DeletionTimestamp != nil; ad != bd {
			if bd {
				return -1
			}
			return 1
		}
		return compareAge(a, b)
	})
	return found[0]
}

func isBound(t *appstudiov1alpha1.DeploymentTarget) bool {
	return t.Status.Phase == appstudiov1alpha1.DeploymentTargetPhaseBound && t.DeletionTimestamp == nil
}

// compareAge orders oldest first, then by name, which makes "best match"
// deterministic even for targets created within the same second.
func compareAge(a, b *appstudiov1alpha1.DeploymentTarget) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// Unavailable says why a target cannot be claimed by a new claim, or returns
// "" when it can: it must be unclaimed, not being deleted, in phase empty
// (not yet seen by the binder) or Available, and carry credentials.
func Unavailable(t *appstudiov1alpha1.DeploymentTarget) string {
	switch {
	case t.DeletionTimestamp != nil:
		return "it is being deleted"
	case t.Spec.ClaimRef != nil && t.Spec.ClaimRef.Name != "":
		return fmt.Sprintf("it is claimed by %q", t.Spec.ClaimRef.Name)
	case t.Status.Phase != "" && t.Status.Phase != appstudiov1alpha1.DeploymentTargetPhaseAvailable:
		return fmt.Sprintf("its phase is %s", t.Status.Phase)
	case t.Spec.KubernetesClusterCredentials.APIURL == "" || t.Spec.KubernetesClusterCredentials.ClusterCredentialsSecret == "":
		return "it has no credentials"
	}
	return ""
}

// Candidates returns the targets a claim without spec.targetName may be bound
// to, best match first: same class, available (see Unavailable), oldest
// first, then by name.
func Candidates(claim *appstudiov1alpha1.DeploymentTargetClaim, targets []appstudiov1alpha1.DeploymentTarget) []*appstudiov1alpha1.DeploymentTarget {
	var out []*appstudiov1alpha1.DeploymentTarget
	for i := range targets {
		t := &targets[i]
		if t.Namespace != claim.Namespace || t.Spec.DeploymentTargetClassName != claim.Spec.DeploymentTargetClassName {
			continue
		}
		if Unavailable(t) != "" {
			continue
		}
		out = append(out, t)
	}
	slices.SortFunc(out, compareAge)
	return out
}
