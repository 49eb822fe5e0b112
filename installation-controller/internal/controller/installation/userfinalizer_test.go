package installation_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// An installation a user's finalizer keeps after its deletion job removed
// Terrace's is done: later reconciles (here: annotation edits) do nothing.
// Running phase Deleting again each time would delete the context objects
// again (two DeleteAllOf requests) and report another Deleted event and
// another JobFinished metric.
func TestDeletedInstallationKeptByAnotherFinalizerIsDone(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	root := newInstallation(ns, "root", simpleBlueprint(""), reconcileAnnotation...)
	create(g, root)
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
	setHold(g, root, true)
	g.Expect(env.Client.Delete(ctx, root)).To(Succeed())
	g.Eventually(func() ([]string, error) {
		i, err := getInst(ns, "root")()
		if err != nil {
			return nil, err
		}
		return i.Finalizers, nil
	}, timeout, interval).Should(ConsistOf(holdFinalizer), "the deletion job removes Terrace's finalizer only")

	deleted := func() ([]corev1.Event, error) {
		evs := &corev1.EventList{}
		err := env.Client.List(ctx, evs, client.InNamespace(ns), client.MatchingFields{"reason": "Deleted"})
		var out []corev1.Event
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind == "Installation" && e.InvolvedObject.Name == "root" {
				out = append(out, e)
			}
		}
		return out, err
	}
	once := And(HaveLen(1), HaveEach(And(HaveField("Series", BeNil()), HaveField("Count", BeNumerically("<=", 1)))))
	g.Eventually(deleted, timeout, interval).Should(once)
	for n := range 3 {
		i, err := getInst(ns, "root")()
		g.Expect(err).NotTo(HaveOccurred())
		annotate(g, i, "example.org/touched", fmt.Sprint(n))
	}
	g.Consistently(deleted).WithTimeout(3*time.Second).WithPolling(interval).Should(once, "the deletion is reported once")

	// The user's finalizer gone, the installation is.
	setHold(g, root, false)
	g.Eventually(func() bool {
		_, err := getInst(ns, "root")()
		return apierrors.IsNotFound(err)
	}, timeout, interval).Should(BeTrue())
}
