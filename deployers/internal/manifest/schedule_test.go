package manifest_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// TestBadContinuousReconcile: a malformed cron schedule, or cron beside
// every, fails the item naming the field.
func TestBadContinuousReconcile(t *testing.T) {
	ns, g := setup(t)
	target(g, ns, "t", nil)
	cases := map[string]struct{ cr, msg string }{
		"cron":  {`{"cron":"* * *"}`, `spec.config.continuousReconcile.cron: "* * *": needs 5 fields (minute hour day-of-month month day-of-week), has 3`},
		"both":  {`{"cron":"* * * * *","every":"5m"}`, "spec.config.continuousReconcile: set cron or every, not both"},
		"range": {`{"cron":"0 0 * 13 *"}`, `spec.config.continuousReconcile.cron: "0 0 * 13 *": month field "13": "13" is not a value from 1 to 12`},
	}
	for name, tc := range cases {
		di := item(ns, name, "t", v2(`"manifests":[],"continuousReconcile":`+tc.cr))
		g.Expect(env.Client.Create(context.Background(), di)).To(Succeed())
		g.Eventually(get(g, di), timeout, interval).Should(failedWith(lib.ReasonInvalidConfig, lsv1alpha1.ErrorConfigurationProblem, tc.msg))
	}
}
