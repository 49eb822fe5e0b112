// Package sandbox holds what the sandbox-provisioner's reconcilers share: the
// field manager, the deterministic names of the SpaceRequest and
// DeploymentTarget provisioned for a claim, the SpaceRequest's readiness, and
// the tracer and span names.
//
// # Names and ownership
//
// A claim's SpaceRequest and DeploymentTarget are both named
// "<claim name>-<8 hex characters of the claim's UID hash>". The name is a
// function of the claim alone, so two workers, two replicas or a restarted
// process all create the same object: the second create is a no-op
// server-side apply, never a duplicate. Including the UID means a claim that
// is deleted and created again under the same name gets fresh objects, and
// never adopts a target an earlier claim left behind (Retain).
//
// Neither object carries an owner reference. An owner reference to the claim
// would let the garbage collector delete the SpaceRequest (and with it the
// namespace) when the claim goes, which is wrong for reclaimPolicy Retain,
// where the target (and what it points to) must outlive the claim. The
// target cannot own the SpaceRequest either: the SpaceRequest exists first.
// Instead the SpaceRequest is labelled with the claim and class
// (appstudio.openshift.io/dtc, appstudio.openshift.io/dtcls) and the target
// is annotated with the SpaceRequest's name; deletion is explicit: deleting
// the target deletes its SpaceRequest (target reconciler), and a SpaceRequest
// whose claim is gone without a target is deleted whatever its class says: it
// never backed a target a reclaimPolicy could keep (orphan reconciler).
package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
)

// FieldManager is the server-side apply field manager of everything the
// sandbox-provisioner writes.
const FieldManager = "sandbox-provisioner"

// maxNameLength keeps names valid as label values and DNS labels.
const maxNameLength = 63

// ObjectName is the name of the SpaceRequest and of the DeploymentTarget
// provisioned for claim (both in the claim's namespace).
func ObjectName(claim *appstudiov1alpha1.DeploymentTargetClaim) string {
	sum := sha256.Sum256([]byte(claim.UID))
	suffix := hex.EncodeToString(sum[:])[:8]
	prefix := claim.Name
	if len(prefix) > maxNameLength-len(suffix)-1 {
		prefix = strings.TrimRight(prefix[:maxNameLength-len(suffix)-1], "-.")
	}
	return prefix + "-" + suffix
}

// NamesOtherTarget says whether claim's spec.targetName names a target other
// than the one this provisioner makes for it (ObjectName): the binder then
// binds the claim statically to that target, and nothing this provisioner
// makes for the claim would be used.
func NamesOtherTarget(claim *appstudiov1alpha1.DeploymentTargetClaim) bool {
	return claim.Spec.TargetName != "" && claim.Spec.TargetName != ObjectName(claim)
}

// WantsSandbox says whether the binder marked claim for this provisioner.
func WantsSandbox(o metav1.Object) bool {
	return o.GetAnnotations()[appstudiov1alpha1.ProvisionerAnnotation] == appstudiov1alpha1.SandboxProvisioner
}

// ProvisionedBySandbox says whether this provisioner created target.
func ProvisionedBySandbox(o metav1.Object) bool {
	return o.GetAnnotations()[appstudiov1alpha1.ProvisionedByAnnotation] == appstudiov1alpha1.SandboxProvisioner
}

// SpaceRequestReady returns whether sr is Ready=True with a namespace, and
// the Ready condition's reason and message for messages.
func SpaceRequestReady(sr *toolchainv1alpha1.SpaceRequest) (bool, string) {
	c := meta.FindStatusCondition(sr.Status.Conditions, toolchainv1alpha1.ConditionReady)
	if c == nil {
		return false, "no Ready condition yet"
	}
	if c.Status != metav1.ConditionTrue {
		return false, c.Reason + ": " + c.Message
	}
	if len(sr.Status.NamespaceAccess) == 0 || sr.Status.NamespaceAccess[0].Name == "" || sr.Status.NamespaceAccess[0].SecretRef == "" {
		return false, "Ready but status.namespaceAccess is empty"
	}
	if sr.Status.TargetClusterURL == "" {
		return false, "Ready but status.targetClusterURL is empty"
	}
	return true, c.Reason
}
