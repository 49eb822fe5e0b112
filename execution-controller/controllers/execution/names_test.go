package execution

import (
	"strings"
	"testing"

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
