package controller_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/controller"
	"github.com/terrace-dev/terrace/execution-controller/internal/controller/timeouts"
	"github.com/terrace-dev/terrace/kit/timeout"
)

// pickupWarnings returns the WaitingForPickup Events on the object name.
func pickupWarnings(g Gomega, ns, name string) []eventsv1.Event {
	var list eventsv1.EventList
	g.Expect(env.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == timeouts.EventWaitingForPickup {
			out = append(out, e)
		}
	}
	return out
}

// TestItemNotPickedUpIsWarnedOnceBeforeItsPickupTimeout: an item of a type
// no deployer serves (the mock type with a typo) does not wait silently until
// the pickup timeout fails it. After the pickup warning it gets one Warning
// WaitingForPickup naming its type and when it will fail, and so does its
// execution, before the pickup timeout, and no more on later reconciles; the
// pickup timeout still fails it with the seed's message. An item picked up
// in time gets no warning and no write from the warning's wake-up.
func TestItemNotPickedUpIsWarnedOnceBeforeItsPickupTimeout(t *testing.T) {
	ns := newNamespace(t)
	const pickup = 8 * time.Second
	startManager(t, ns, testOptions(func(o *controller.Options) {
		o.Timeouts = timeouts.Config{Pickup: timeout.After(pickup), PickupWarning: timeout.After(time.Second),
			Progressing: timeout.Disabled(), Abort: timeout.Disabled()}
	}))
	g := NewWithT(t)

	// Healthy: picked up at once.
	fine := newExecution(ns, "fine", mockItem("a", mockv1alpha1Config()))
	g.Expect(env.Client.Create(ctx, fine)).To(Succeed())
	g.Expect(waitFinished(t, fine).Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	var settled string
	g.Eventually(func(g Gomega) {
		di := getItem(g, ns, "fine", "a")
		g.Expect(di.Annotations).NotTo(HaveKey(lsv1alpha1.ReconcileTimeAnnotation))
		settled = di.ResourceVersion
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())

	// A typo in the type: no deployer picks it up.
	typo := mockItem("manifest", mockv1alpha1Config())
	typo.Type = lsv1alpha1.MockDeployItemType + "s"
	exec := newExecution(ns, "typo", typo)
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	var stamp time.Time
	var itemName string
	g.Eventually(func(g Gomega) {
		di := getItem(g, ns, "typo", "manifest")
		g.Expect(di.Annotations).To(HaveKey(lsv1alpha1.ReconcileTimeAnnotation))
		var err error
		stamp, err = time.Parse(time.RFC3339, di.Annotations[lsv1alpha1.ReconcileTimeAnnotation])
		g.Expect(err).NotTo(HaveOccurred())
		itemName = di.Name
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	failsAt := stamp.Add(pickup).UTC().Format(time.RFC3339)

	var warning eventsv1.Event
	g.Eventually(func(g Gomega) {
		evs := pickupWarnings(g, ns, itemName)
		g.Expect(evs).To(HaveLen(1))
		warning = evs[0]
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	g.Expect(warning.Type).To(Equal("Warning"))
	g.Expect(warning.Note).To(HavePrefix("no deployer has picked up this deploy item of type " + typo.Type + " for "))
	g.Expect(warning.Note).To(ContainSubstring("; is a deployer for this type running? "))
	g.Expect(warning.Note).To(HaveSuffix("it fails with PickupTimeout at " + failsAt))
	g.Expect(warning.Related).NotTo(BeNil())
	g.Expect(warning.Related.Name).To(Equal("typo"))
	// not before the warning's delay
	g.Expect(warning.EventTime.Sub(stamp)).To(BeNumerically(">=", time.Second))
	g.Eventually(func(g Gomega) {
		evs := pickupWarnings(g, ns, "typo")
		g.Expect(evs).To(HaveLen(1))
		g.Expect(evs[0].Type).To(Equal("Warning"))
		g.Expect(evs[0].Note).To(Equal("deploy item " + itemName + ": " + warning.Note))
		g.Expect(evs[0].Related.Name).To(Equal(itemName))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())

	// Later reconciles of the waiting item warn no more.
	for _, v := range []string{"1", "2", "3"} {
		di := getItem(g, ns, "typo", "manifest")
		if di.Labels == nil {
			di.Labels = map[string]string{}
		}
		di.Labels["touch"] = v
		g.Expect(env.Client.Update(ctx, di)).To(Succeed())
	}

	// The pickup timeout fails it as before, after the warning.
	done := waitFinished(t, exec)
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseFailed))
	di := getItem(g, ns, "typo", "manifest")
	g.Expect(di.Status.Phase).To(Equal(lsv1alpha1.PhaseFailed))
	le := di.Status.LastError
	g.Expect(le).NotTo(BeNil())
	g.Expect(le.Reason).To(Equal(lsv1alpha1.ReasonPickupTimeout))
	g.Expect(le.Message).To(Equal("no deployer has reconciled this deployitem within 8 seconds"))
	g.Expect(warning.EventTime.Time).To(BeTemporally("<", le.LastUpdateTime.Time))

	g.Consistently(func(g Gomega) {
		for _, name := range []string{itemName, "typo"} {
			evs := pickupWarnings(g, ns, name)
			g.Expect(evs).To(HaveLen(1), name)
			g.Expect(evs[0].Series).To(BeNil(), "%s: emitted once", name)
		}
	}).WithTimeout(2 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

	// The healthy item's warning wake-up (long past) did nothing.
	g.Expect(pickupWarnings(g, ns, getItem(g, ns, "fine", "a").Name)).To(BeEmpty())
	g.Expect(pickupWarnings(g, ns, "fine")).To(BeEmpty())
	g.Expect(getItem(g, ns, "fine", "a").ResourceVersion).To(Equal(settled))
}
