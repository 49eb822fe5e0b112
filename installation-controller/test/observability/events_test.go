package observability_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/observabilitytest"
)

// A successful job leaves a Succeeded event on every installation it went
// through, each once (events mark outcomes, not reconciles). Installations
// emit no JobStarted (a job's start is in its trace, logs and metrics).
func TestEventsOfASuccessfulJob(t *testing.T) {
	ns := namespace(t)
	g := NewWithT(t)
	g.Expect(env.Client.Create(context.Background(), newRoot(ns, "root", treeBlueprint("")))).To(Succeed())
	waitFinished(t, ns, "root", lsv1alpha1.PhaseSucceeded)

	var want []string
	for _, n := range treeInstallations {
		want = append(want, "Installation/"+n+" Normal Succeeded")
	}
	g.Eventually(func(g Gomega) []string { return observabilitytest.NamespaceEvents(g, env.Client, ns) }).WithTimeout(timeout).WithPolling(interval).
		Should(ContainElements(want))
	evs := observabilitytest.NamespaceEvents(g, env.Client, ns)
	for _, e := range want {
		g.Expect(count(evs, e)).To(Equal(1), e)
	}
	g.Expect(evs).NotTo(ContainElement(ContainSubstring(" Warning ")))
	g.Expect(evs).NotTo(ContainElement(And(HavePrefix("Installation/"), HaveSuffix(" JobStarted"))))
}

// A failing execution fails its installation and the root; each says why
// (the lastError reason) and that its job ended Failed.
func TestEventsOfAFailedJob(t *testing.T) {
	ns := namespace(t)
	g := NewWithT(t)
	g.Expect(env.Client.Create(context.Background(), newRoot(ns, "root", treeBlueprint("        phase: Failed\n")))).To(Succeed())
	waitFinished(t, ns, "root", lsv1alpha1.PhaseFailed)
	g.Eventually(func(g Gomega) []string { return observabilitytest.NamespaceEvents(g, env.Client, ns) }).WithTimeout(timeout).WithPolling(interval).
		Should(ContainElements(
			"Installation/root-b Warning SubObjectsFailed",
			"Installation/root-b Warning Failed",
			"Installation/root Warning SubObjectsFailed",
			"Installation/root Warning Failed",
			"Installation/root-a Normal Succeeded",
		))
}

// A template that does not render fails the job at once: TemplateFailed
// says why, Failed that the job ended.
func TestEventsOfATemplateError(t *testing.T) {
	ns := namespace(t)
	g := NewWithT(t)
	fs := map[string]string{"blueprint.yaml": `deployExecutions:
- name: broken
  type: GoTemplate
  template: |
    deployItems: {{ fail "no items today" }}
`}
	g.Expect(env.Client.Create(context.Background(), newRoot(ns, "broken", fs))).To(Succeed())
	waitFinished(t, ns, "broken", lsv1alpha1.PhaseFailed)
	g.Eventually(func(g Gomega) []string { return observabilitytest.NamespaceEvents(g, env.Client, ns) }).WithTimeout(timeout).WithPolling(interval).
		Should(ContainElements("Installation/broken Warning TemplateFailed", "Installation/broken Warning Failed"))
	g.Expect(observabilitytest.NamespaceEvents(g, env.Client, ns)).NotTo(ContainElement("Installation/broken Normal JobStarted"))
}

func count(list []string, s string) int {
	n := 0
	for _, e := range list {
		if e == s {
			n++
		}
	}
	return n
}
