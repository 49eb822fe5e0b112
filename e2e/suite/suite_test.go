// Package suite is Terrace's end-to-end suite (ginkgo v2). It runs against the
// cluster named by E2E_KUBECONFIG, or else a local environment it starts
// itself with hack/local-env.sh: etcd, kube-apiserver and
// kube-controller-manager on loopback and every Terrace binary as its own
// process under its own ServiceAccount and generated ClusterRole. See
// e2e/README.md.
package suite

import (
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Bounds of every wait in the suite. Jobs take well under a second when the
// machine is idle; the bounds leave room for a loaded 2-core CI machine.
const (
	timeout = 2 * time.Minute
	poll    = 200 * time.Millisecond
)

var env *Environment

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(timeout)
	SetDefaultEventuallyPollingInterval(poll)
	logf.SetLogger(GinkgoLogr)
	// End before `go test -timeout` does: its panic would skip AfterSuite and
	// leave the local environment's processes running.
	suiteConfig, reporterConfig := GinkgoConfiguration()
	if deadline, ok := t.Deadline(); ok {
		suiteConfig.Timeout = time.Until(deadline) - 2*time.Minute
	}
	RunSpecs(t, "Terrace e2e", suiteConfig, reporterConfig)
}

var _ = BeforeSuite(func(ctx SpecContext) {
	env = startEnvironment(ctx)
}, NodeTimeout(10*time.Minute))

var _ = AfterSuite(func(ctx SpecContext) {
	env.Stop(ctx)
}, NodeTimeout(2*time.Minute))

// A failed spec prints the controllers' recent log lines.
var _ = ReportAfterEach(func(report SpecReport) {
	if report.Failed() && env != nil && env.Local() {
		AddReportEntry("controller logs", env.logTail(40))
	}
})
