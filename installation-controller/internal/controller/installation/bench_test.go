package installation_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

func countSucceeded(ns string, want int) func() (int, error) {
	return func() (int, error) {
		list := &lsv1alpha1.InstallationList{}
		if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			return 0, err
		}
		n := 0
		for _, i := range list.Items {
			if i.Status.Phase == lsv1alpha1.PhaseSucceeded && i.Status.JobID == i.Status.JobIDFinished {
				n++
			}
		}
		if len(list.Items) != want {
			return -len(list.Items), nil
		}
		return n, nil
	}
}

// BenchmarkRootInstallations creates 100 root installations (one execution,
// one mock item each) at once and waits until all succeeded.
func BenchmarkRootInstallations(b *testing.B) {
	const n = 100
	for b.Loop() {
		b.StopTimer()
		ns, g := setup(b)
		b.StartTimer()
		start := time.Now()
		for i := range n {
			create(g, newInstallation(ns, fmt.Sprintf("root-%03d", i), simpleBlueprint(""), reconcileAnnotation...))
		}
		g.Eventually(countSucceeded(ns, n), 5*time.Minute, 200*time.Millisecond).Should(Equal(n))
		b.ReportMetric(float64(n)/time.Since(start).Seconds(), "installations/s")
	}
}

// treeOfDepth3 is a root with 3 sub-installations with 3 sub-installations
// each (13 installations); every installation has one mock item.
func treeOfDepth3() map[string]string {
	item := indent(mockItem("item", ""), 4)
	level := func(sub string) string {
		s := "deployExecutions:\n- name: d\n  type: GoTemplate\n  template: |\n    deployItems:\n" + item + "\n"
		if sub != "" {
			s += "subinstallations:\n"
			for i := range 3 {
				s += fmt.Sprintf("- name: s%d\n  blueprint:\n    dir: %s\n", i, sub)
			}
		}
		return s
	}
	return map[string]string{
		"blueprint.yaml":       level("l1"),
		"l1/blueprint.yaml":    level("l2"),
		"l1/l2/blueprint.yaml": level(""),
	}
}

// BenchmarkTreeDepth3FanOut3 runs one job through a tree of 13 installations.
func BenchmarkTreeDepth3FanOut3(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		ns, g := setup(b)
		b.StartTimer()
		create(g, newInstallation(ns, "root", treeOfDepth3(), reconcileAnnotation...))
		g.Eventually(countSucceeded(ns, 13), 5*time.Minute, 200*time.Millisecond).Should(Equal(13))
	}
}

// The depth-3 tree also runs as a test, so `go test` covers it.
func TestTreeDepth3FanOut3(t *testing.T) {
	ns, g := setup(t)
	create(g, newInstallation(ns, "root", treeOfDepth3(), reconcileAnnotation...))
	g.Eventually(countSucceeded(ns, 13), timeout, 200*time.Millisecond).Should(Equal(13))
	execs := &lsv1alpha1.ExecutionList{}
	g.Expect(env.Client.List(context.Background(), execs, client.InNamespace(ns))).To(Succeed())
	g.Expect(execs.Items).To(HaveLen(13))
}
