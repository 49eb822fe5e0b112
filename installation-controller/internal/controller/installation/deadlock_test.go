package installation_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// A successor's job that waits in Init for a predecessor being deleted
// (which itself waits in InitDelete for the successor to go) ends on an
// interrupt: the successor's deletion can then run, and so can the
// predecessor's. Without it both would wait for each other for good.
func TestInterruptEndsJobWaitingForPredecessors(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	predecessorAndSuccessor(g, ns)

	pp, err := getInst(ns, "p")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Delete(ctx, pp)).To(Succeed())
	g.Eventually(getInst(ns, "p"), timeout, interval).Should(inPhase(lsv1alpha1.PhaseInitDelete))

	ss, err := getInst(ns, "s")()
	g.Expect(err).NotTo(HaveOccurred())
	annotate(g, ss, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	waitingForP := func(i *lsv1alpha1.Installation) bool {
		for _, c := range i.Status.Conditions {
			if c.Type == lsv1alpha1.ConditionReady && c.Reason == "Waiting" && strings.Contains(c.Message, "predecessors p") {
				return i.Status.Phase == lsv1alpha1.PhaseInit && i.Status.JobID != i.Status.JobIDFinished
			}
		}
		return false
	}
	g.Eventually(getInst(ns, "s"), timeout, interval).Should(Satisfy(waitingForP))

	ss, err = getInst(ns, "s")()
	g.Expect(err).NotTo(HaveOccurred())
	annotate(g, ss, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationInterrupt))
	g.Eventually(getInst(ns, "s"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseFailed),
		HaveField("Status.LastError.Reason", lsv1alpha1.ReasonInterrupted),
		HaveField("Status.LastError.Message", ContainSubstring("predecessors p")),
		HaveField("ObjectMeta.Annotations", Not(HaveKey(lsv1alpha1.OperationAnnotation)))))

	ss, err = getInst(ns, "s")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Delete(ctx, ss)).To(Succeed())
	g.Eventually(gone(getInst(ns, "s")), timeout, interval).Should(BeTrue())
	g.Eventually(gone(getInst(ns, "p")), timeout, interval).Should(BeTrue())
}
