package binding

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
)

func target(name string, age time.Duration, claim string, phase appstudiov1alpha1.DeploymentTargetPhase) appstudiov1alpha1.DeploymentTarget {
	t := appstudiov1alpha1.DeploymentTarget{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns",
			CreationTimestamp: metav1.NewTime(time.Unix(1_000_000, 0).Add(-age)),
		},
		Spec: appstudiov1alpha1.DeploymentTargetSpec{
			DeploymentTargetClassName: "c",
			KubernetesClusterCredentials: appstudiov1alpha1.DeploymentTargetKubernetesClusterCredentials{
				APIURL: "https://x", ClusterCredentialsSecret: "s",
			},
		},
		Status: appstudiov1alpha1.DeploymentTargetStatus{Phase: phase},
	}
	if claim != "" {
		t.Spec.ClaimRef = &appstudiov1alpha1.DeploymentTargetClaimReference{Name: claim}
	}
	return t
}

func claim(name, targetName string) *appstudiov1alpha1.DeploymentTargetClaim {
	return &appstudiov1alpha1.DeploymentTargetClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec:       appstudiov1alpha1.DeploymentTargetClaimSpec{DeploymentTargetClassName: "c", TargetName: targetName},
	}
}

func TestCandidatesOrder(t *testing.T) {
	other := target("other-class", time.Hour, "", "")
	other.Spec.DeploymentTargetClassName = "d"
	targets := []appstudiov1alpha1.DeploymentTarget{
		target("b", time.Minute, "", ""),
		target("a", time.Minute, "", appstudiov1alpha1.DeploymentTargetPhaseAvailable),
		target("old", time.Hour, "", ""),
		target("claimed", 2*time.Hour, "x", ""),
		target("released", 2*time.Hour, "", appstudiov1alpha1.DeploymentTargetPhaseReleased),
		other,
	}
	got := Candidates(claim("c1", ""), targets)
	var names []string
	for _, c := range got {
		names = append(names, c.Name)
	}
	want := []string{"old", "a", "b"}
	if len(names) != len(want) {
		t.Fatalf("got %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("got %v, want %v", names, want)
		}
	}
}

func TestBoundTargetPrefersBoundThenOldest(t *testing.T) {
	targets := []appstudiov1alpha1.DeploymentTarget{
		target("young-bound", time.Minute, "c1", appstudiov1alpha1.DeploymentTargetPhaseBound),
		target("old", time.Hour, "c1", ""),
	}
	if got := BoundTarget(claim("c1", ""), targets); got == nil || got.Name != "young-bound" {
		t.Fatalf("want young-bound, got %v", got)
	}
	targets[0].Status.Phase = ""
	if got := BoundTarget(claim("c1", ""), targets); got == nil || got.Name != "old" {
		t.Fatalf("want old, got %v", got)
	}
	if got := BoundTarget(claim("c1", "young-bound"), targets); got == nil || got.Name != "young-bound" {
		t.Fatalf("spec.targetName must win, got %v", got)
	}
	if got := BoundTarget(claim("c2", ""), targets); got != nil {
		t.Fatalf("no target names c2, got %v", got.Name)
	}
}

// TestHeldTargetIgnoresClassChange: the target a claim was bound to stays
// held after the claim's class changes; a target of another class that only
// names the claim, or a Released one, is never held.
func TestHeldTargetIgnoresClassChange(t *testing.T) {
	bound := target("bound", time.Hour, "c1", appstudiov1alpha1.DeploymentTargetPhaseBound)
	bound.Status.Conditions = []metav1.Condition{{Type: appstudiov1alpha1.ConditionBound, Status: metav1.ConditionTrue}}
	c := claim("c1", "bound")
	c.Spec.DeploymentTargetClassName = "changed"
	// A new claim of the same name (the old one's finalizer removed by
	// hand, recreated with another class before the target turned
	// Released) never recorded a binding: the target is not its.
	if got := HeldTarget(c, []appstudiov1alpha1.DeploymentTarget{bound}); got != nil {
		t.Fatalf("a claim that never recorded a binding holds nothing of another class, got %v", got.Name)
	}
	c.Annotations = map[string]string{appstudiov1alpha1.BindCompleteAnnotation: appstudiov1alpha1.AnnotationTrue}
	if got := HeldTarget(c, []appstudiov1alpha1.DeploymentTarget{bound}); got == nil || got.Name != "bound" {
		t.Fatalf("want bound (by its Bound condition), got %v", got)
	}
	c.Annotations = nil
	if got := BoundTarget(c, []appstudiov1alpha1.DeploymentTarget{bound}); got != nil {
		t.Fatalf("BoundTarget binds same-class targets only, got %v", got.Name)
	}

	// The claim's record alone (the target's status lags, or an older
	// binder flipped it): bind-complete and spec.targetName.
	recorded := target("bound", time.Hour, "c1", appstudiov1alpha1.DeploymentTargetPhasePending)
	if got := HeldTarget(c, []appstudiov1alpha1.DeploymentTarget{recorded}); got != nil {
		t.Fatalf("not bound-complete: not held, got %v", got.Name)
	}
	c.Annotations = map[string]string{appstudiov1alpha1.BindCompleteAnnotation: appstudiov1alpha1.AnnotationTrue}
	if got := HeldTarget(c, []appstudiov1alpha1.DeploymentTarget{recorded}); got == nil || got.Name != "bound" {
		t.Fatalf("want bound (by the claim's record), got %v", got)
	}

	// Pre-bound by claimRef, of another class, never bound: not held.
	prebound := target("prebound", time.Hour, "c1", appstudiov1alpha1.DeploymentTargetPhasePending)
	prebound.Spec.DeploymentTargetClassName = "d"
	if got := HeldTarget(claim("c1", ""), []appstudiov1alpha1.DeploymentTarget{prebound}); got != nil {
		t.Fatalf("a never-bound target of another class is not held, got %v", got.Name)
	}

	// Released: never held, whatever its conditions say.
	bound.Status.Phase = appstudiov1alpha1.DeploymentTargetPhaseReleased
	if got := HeldTarget(c, []appstudiov1alpha1.DeploymentTarget{bound}); got != nil {
		t.Fatalf("a Released target is not held, got %v", got.Name)
	}
}

// TestHeldTargetByRecord: a target recording the claim object (its UID) is
// held by that claim once it is bind-complete, whatever the target's Bound
// condition says (the target reconciler flips it when spec.targetName names
// another target) and whatever spec.targetName names now.
func TestHeldTargetByRecord(t *testing.T) {
	c := claim("c1", "other")
	c.UID = "uid-1"
	c.Spec.DeploymentTargetClassName = "changed"
	dt := target("dt", time.Hour, "c1", appstudiov1alpha1.DeploymentTargetPhasePending)
	dt.Annotations = map[string]string{appstudiov1alpha1.ClaimAnnotation: "c1/uid-1"}
	dt.Status.Conditions = []metav1.Condition{{Type: appstudiov1alpha1.ConditionBound, Status: metav1.ConditionFalse}}
	if got := HeldTarget(c, []appstudiov1alpha1.DeploymentTarget{dt}); got != nil {
		t.Fatalf("not bind-complete: not held, got %v", got.Name)
	}
	c.Annotations = map[string]string{appstudiov1alpha1.BindCompleteAnnotation: appstudiov1alpha1.AnnotationTrue}
	if got := HeldTarget(c, []appstudiov1alpha1.DeploymentTarget{dt}); got == nil || got.Name != "dt" {
		t.Fatalf("want dt (recorded for this claim object), got %v", got)
	}
	// Recorded for another object of the name: never held.
	dt.Annotations[appstudiov1alpha1.ClaimAnnotation] = "c1/uid-0"
	if got := HeldTarget(c, []appstudiov1alpha1.DeploymentTarget{dt}); got != nil {
		t.Fatalf("recorded for an earlier claim object: not held, got %v", got.Name)
	}
}

// TestTargetForEarlierClaimIsNotTheNewClaims: a target whose ClaimAnnotation
// records another UID for the claim's name was bound (or provisioned) for an
// earlier claim object of that name: a new claim of the name neither binds
// nor holds it. A target without the record, or with a record for another
// name (its claimRef rewritten by hand), is bound by name as before.
func TestTargetForEarlierClaimIsNotTheNewClaims(t *testing.T) {
	c := claim("c1", "")
	c.UID = "new-uid"
	c.Annotations = map[string]string{appstudiov1alpha1.BindCompleteAnnotation: appstudiov1alpha1.AnnotationTrue}
	bound := target("bound", time.Hour, "c1", appstudiov1alpha1.DeploymentTargetPhaseBound)
	bound.Status.Conditions = []metav1.Condition{{Type: appstudiov1alpha1.ConditionBound, Status: metav1.ConditionTrue}}

	for _, tc := range []struct {
		record  string
		earlier bool
	}{
		{"", false},
		{"c1/new-uid", false},
		{"c1/old-uid", true},
		{"other/old-uid", false}, // written for another name: ignored
		{"malformed", false},
	} {
		dt := bound.DeepCopy()
		if tc.record != "" {
			dt.Annotations = map[string]string{appstudiov1alpha1.ClaimAnnotation: tc.record}
		}
		if got := ForEarlierClaim(dt, c); got != tc.earlier {
			t.Errorf("record %q: ForEarlierClaim = %v, want %v", tc.record, got, tc.earlier)
		}
		want := !tc.earlier
		if got := BoundTarget(c, []appstudiov1alpha1.DeploymentTarget{*dt}) != nil; got != want {
			t.Errorf("record %q: bound = %v, want %v", tc.record, got, want)
		}
		other := c.DeepCopy()
		other.Spec.DeploymentTargetClassName = "changed"
		if got := HeldTarget(other, []appstudiov1alpha1.DeploymentTarget{*dt}) != nil; got != want {
			t.Errorf("record %q: held after a class change = %v, want %v", tc.record, got, want)
		}
	}
	if got := appstudiov1alpha1.ClaimRecord(c); got != "c1/new-uid" {
		t.Errorf("ClaimRecord = %q", got)
	}
}

// TestReclaimedTargetByDurableFact: a claim's deletion reclaims only a target
// it holds by a durable fact (the target records the claim object, or the
// claim is bind-complete); a target that only names it (pre-bound by a user)
// is left alone, and one recording the claim is chosen over it.
func TestReclaimedTargetByDurableFact(t *testing.T) {
	c := claim("c1", "free-a")
	c.UID = "uid-1"
	byoc := target("byoc", time.Hour, "c1", appstudiov1alpha1.DeploymentTargetPhasePending)
	if got := ReclaimedTarget(c, []appstudiov1alpha1.DeploymentTarget{byoc}); got != nil {
		t.Fatalf("a target that only names the claim is not reclaimed, got %s", got.Name)
	}
	if got := HeldTarget(c, []appstudiov1alpha1.DeploymentTarget{byoc}); got == nil || got.Name != "byoc" {
		t.Fatalf("HeldTarget still reports the pre-bound target, got %v", got)
	}

	recorded := target("recorded", time.Minute, "c1", "")
	recorded.Annotations = map[string]string{appstudiov1alpha1.ClaimAnnotation: "c1/uid-1"}
	if got := ReclaimedTarget(c, []appstudiov1alpha1.DeploymentTarget{byoc, recorded}); got == nil || got.Name != "recorded" {
		t.Fatalf("the target recording the claim is reclaimed, got %v", got)
	}

	c.Annotations = map[string]string{appstudiov1alpha1.BindCompleteAnnotation: appstudiov1alpha1.AnnotationTrue}
	if got := ReclaimedTarget(c, []appstudiov1alpha1.DeploymentTarget{byoc}); got == nil || got.Name != "byoc" {
		t.Fatalf("a bind-complete claim's target without the record (bound before it existed) is reclaimed, got %v", got)
	}
}
