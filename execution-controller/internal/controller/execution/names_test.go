package execution

import (
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

func TestNamesAreDeterministicAndValid(t *testing.T) {
	if got := ItemObjectName("shop", "db"); got != "shop-db" {
		t.Errorf("ItemObjectName = %q", got)
	}
	long := strings.Repeat("x", 250)
	a, b := ItemObjectName(long, "db"), ItemObjectName(long, "db")
	if a != b || len(a) > validation.DNS1123SubdomainMaxLength || len(validation.IsDNS1123Subdomain(a)) != 0 {
		t.Errorf("long name %q (len %d) not deterministic or invalid", a, len(a))
	}
	if ItemObjectName(long, "db") == ItemObjectName(long, "web") {
		t.Error("shortened names collide")
	}
	if got := ManagedByValue("shop"); got != "shop" {
		t.Errorf("ManagedByValue = %q", got)
	}
	if v := ManagedByValue(strings.Repeat("a.b-", 30)); len(validation.IsValidLabelValue(v)) != 0 {
		t.Errorf("ManagedByValue of a long name is not a label value: %q", v)
	}
}

func TestStateOf(t *testing.T) {
	di := func(job, finished string, phase lsv1alpha1.Phase) *lsv1alpha1.DeployItem {
		return &lsv1alpha1.DeployItem{Status: lsv1alpha1.DeployItemStatus{JobID: job, JobIDFinished: finished, Phase: phase}}
	}
	for name, tc := range map[string]struct {
		item *lsv1alpha1.DeployItem
		want itemState
	}{
		"missing":               {nil, statePending},
		"previous job":          {di("old", "old", lsv1alpha1.PhaseSucceeded), statePending},
		"handed, not picked up": {di("j", "old", lsv1alpha1.PhaseSucceeded), stateRunning},
		"running":               {di("j", "old", lsv1alpha1.PhaseProgressing), stateRunning},
		"succeeded":             {di("j", "j", lsv1alpha1.PhaseSucceeded), stateSucceeded},
		"failed":                {di("j", "j", lsv1alpha1.PhaseFailed), stateFailed},
		// A hook-forced re-apply against drift runs in the finished job.
		"re-applying":       {di("j", "j", lsv1alpha1.PhaseProgressing), stateRunning},
		"re-apply starting": {di("j", "j", lsv1alpha1.PhaseInit), stateRunning},
	} {
		if got := stateOf(tc.item, "j"); got != tc.want {
			t.Errorf("%s: got %d, want %d", name, got, tc.want)
		}
	}
}

// The execution's lastError quotes the first failed item's cause, its
// message bounded: its middle is cut (on rune boundaries), its start and end
// kept.
func TestFirstCauseIsBounded(t *testing.T) {
	long := strings.Repeat("é", 400) + "end"
	items := map[string]*lsv1alpha1.DeployItem{
		"quiet": {},
		"loud":  {Status: lsv1alpha1.DeployItemStatus{LastError: &lsv1alpha1.Error{Reason: "Boom", Message: long, Codes: []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorTimeout}}}},
	}
	got := firstCause(items, []string{"quiet", "loud"})
	prefix := "; loud: Boom: "
	if !strings.HasPrefix(got, prefix+"éé") || !strings.Contains(got, " … ") || !strings.HasSuffix(got, "éend") ||
		len(got) > len(prefix)+maxCauseLength {
		t.Errorf("firstCause = %q (len %d)", got, len(got))
	}
	if !utf8.ValidString(got) {
		t.Errorf("firstCause cut a rune: %q", got)
	}
	if c := firstCodes(items, []string{"quiet", "loud"}); len(c) != 1 || c[0] != lsv1alpha1.ErrorTimeout {
		t.Errorf("firstCodes = %v", c)
	}
	if got := firstCause(items, []string{"quiet"}); got != "" {
		t.Errorf("firstCause without lastError = %q", got)
	}
}

// A failed deletion's message ends with the deployer's way out (retry, or
// delete-without-uninstall): the execution's lastError quotes it whole, for
// a message of ordinary length and for a long one (cut in its middle).
func TestFirstCauseKeepsTheWayOut(t *testing.T) {
	// As the deployer library appends it to every failed deletion.
	wayOut := "; fix the cause and retry the deletion with the annotation " + lsv1alpha1.OperationAnnotation + ": " +
		string(lsv1alpha1.OperationReconcile) + ", or annotate the item with " + lsv1alpha1.DeleteWithoutUninstallAnnotation +
		": \"true\" to delete it without uninstalling"
	targetGone := "spec.target: Target landscape-production-eu-west-1/shoot-kubeconfig-target-for-the-payments-platform-workloads not found"
	var unreachable []string
	for _, obj := range []string{"Deployment payments/api-gateway", "Service payments/api-gateway", "ConfigMap payments/api-gateway-routes"} {
		unreachable = append(unreachable, "deleting "+obj+": Delete \"https://api.payments.internal.example.com:6443/apis/...\": "+
			"dial tcp 10.250.0.17:6443: connect: connection refused")
	}
	for _, tc := range []struct {
		reason, msg string
		whole       bool
	}{
		{"TargetNotFound", targetGone + wayOut, true},
		{"UninstallFailed", "uninstalling: " + strings.Join(unreachable, "; ") + wayOut, false},
	} {
		items := map[string]*lsv1alpha1.DeployItem{"web": {Status: lsv1alpha1.DeployItemStatus{LastError: &lsv1alpha1.Error{
			Operation: "Delete", Reason: tc.reason, Message: tc.msg,
		}}}}
		got := firstCause(items, []string{"web"})
		quoted, ok := strings.CutPrefix(got, "; web: "+tc.reason+": ")
		if !ok || !strings.HasSuffix(got, wayOut) || len(quoted) > maxCauseLength || !strings.HasPrefix(quoted, tc.msg[:40]) {
			t.Errorf("%s (message of %d bytes): firstCause = %q (%d bytes quoted)", tc.reason, len(tc.msg), got, len(quoted))
		}
		if whole := quoted == tc.msg; whole != tc.whole {
			t.Errorf("%s (message of %d bytes): quoted whole = %v, want %v: %q", tc.reason, len(tc.msg), whole, tc.whole, quoted)
		}
	}
}
