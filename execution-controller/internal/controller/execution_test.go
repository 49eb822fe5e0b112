package controller_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	mockv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/mock/v1alpha1"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/controller"
	"github.com/terrace-dev/terrace/execution-controller/internal/controller/execution"
)

var ctx = context.Background()

// assertStartOrder checks, on the recorded item changes, that no item was
// handed the job before every item it depends on had succeeded.
func assertStartOrder(t *testing.T, rec *recorder, job string, deps map[string][]string) {
	t.Helper()
	for item, ds := range deps {
		start := rec.first(handed(item, job))
		if start < 0 {
			t.Errorf("%s was never handed job %s", item, job)
			continue
		}
		for _, d := range ds {
			done := rec.first(succeeded(d, job))
			if done < 0 || done > start {
				t.Errorf("%s started (event %d) before its dependency %s succeeded (event %d)", item, start, d, done)
			}
		}
	}
}

func TestChainAndDiamondRunInDependencyOrder(t *testing.T) {
	ns := newNamespace(t)
	rec := record(t, ns)
	startManager(t, ns, testOptions())
	g := NewWithT(t)

	ok := mockv1alpha1.ProviderConfiguration{}
	exec := newExecution(ns, "shop",
		// chain a → b → c (c is declared first: order comes from dependsOn, not the list)
		mockItem("c", mockv1alpha1.ProviderConfiguration{Export: export(`{"url":"https://c"}`)}, "b"),
		mockItem("b", mockv1alpha1.ProviderConfiguration{Export: export(`"b-value"`), Delay: delay(200 * time.Millisecond)}, "a"),
		mockItem("a", ok),
		// diamond top → left, right → bottom
		mockItem("top", ok),
		mockItem("left", mockv1alpha1.ProviderConfiguration{Delay: delay(300 * time.Millisecond)}, "top"),
		mockItem("right", ok, "top"),
		mockItem("bottom", mockv1alpha1.ProviderConfiguration{Export: export(`{"n":3}`)}, "left", "right"),
	)
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())

	done := waitFinished(t, exec)
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded), "lastError: %+v", done.Status.LastError)
	g.Expect(done.Annotations).NotTo(HaveKey(lsv1alpha1.OperationAnnotation))
	g.Expect(meta.IsStatusConditionTrue(done.Status.Conditions, lsv1alpha1.ConditionReady)).To(BeTrue())
	g.Expect(done.Status.DeployItemReferences).To(HaveLen(7))

	for _, last := range []string{"c", "bottom"} {
		rec.waitRecorded(t, succeeded(last, done.Status.JobID))
	}
	assertStartOrder(t, rec, done.Status.JobID, map[string][]string{
		"a": nil, "b": {"a"}, "c": {"b"},
		"top": nil, "left": {"top"}, "right": {"top"}, "bottom": {"left", "right"},
	})

	// items: deterministic names, owner, labels, spec
	items := listItems(g, ns)
	g.Expect(items).To(HaveLen(7))
	di := getItem(g, ns, "shop", "b")
	g.Expect(di.Name).To(Equal("shop-b"))
	g.Expect(di.Labels).To(HaveKeyWithValue(lsv1alpha1.ManagedByExecutionLabel, "shop"))
	g.Expect(di.Labels).To(HaveKeyWithValue(lsv1alpha1.ExecutionItemNameLabel, "b"))
	g.Expect(di.OwnerReferences).To(HaveLen(1))
	g.Expect(*di.OwnerReferences[0].Controller).To(BeTrue())
	g.Expect(di.Annotations).NotTo(HaveKey(lsv1alpha1.ReconcileTimeAnnotation)) // removed by the deployer on pickup
	g.Expect(di.Status.JobIDFinished).To(Equal(done.Status.JobID))
	byLabel := &lsv1alpha1.DeployItemList{}
	g.Expect(env.Client.List(ctx, byLabel, client.InNamespace(ns), client.MatchingLabels{lsv1alpha1.ManagedByExecutionLabel: "shop"})).To(Succeed())
	g.Expect(byLabel.Items).To(HaveLen(7))

	// field ownership: the execution controller owns spec and status.jobID, not the deployer's fields
	var owned []string
	for _, mf := range di.ManagedFields {
		if mf.Manager == "execution-controller" {
			owned = append(owned, mf.FieldsV1.GetRawString())
		}
	}
	g.Expect(owned).To(ContainElement(ContainSubstring(`"f:jobID"`)))
	g.Expect(owned).NotTo(ContainElement(ContainSubstring(`"f:phase"`)))

	// exports gathered into one DataObject keyed by item name
	g.Expect(done.Status.ExportReference).NotTo(BeNil())
	do := &lsv1alpha1.DataObject{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: done.Status.ExportReference.Name}, do)).To(Succeed())
	var data map[string]any
	g.Expect(json.Unmarshal(do.Data.RawMessage, &data)).To(Succeed())
	g.Expect(data).To(Equal(map[string]any{
		"b":      "b-value",
		"c":      map[string]any{"url": "https://c"},
		"bottom": map[string]any{"n": float64(3)},
	}))

	// a second job (operation: reconcile again) succeeds without creating anything new
	first := done.Status.JobID
	g.Expect(env.Client.Patch(ctx, done, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"landscaper.gardener.cloud/operation":"reconcile"}}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		g.Expect(cur.Status.JobID).NotTo(Equal(first))
		g.Expect(cur.Status.JobIDFinished).To(Equal(cur.Status.JobID))
		g.Expect(cur.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	g.Expect(listItems(g, ns)).To(HaveLen(7))

	// settled: nothing writes any more (no reconcile loop, no no-op writes).
	// The deployer removes an item's reconcile-time in a metadata patch of
	// its own after its status write, which can land after the execution
	// shows Succeeded: the snapshot waits for those patches first.
	g.Eventually(func(g Gomega) {
		for _, di := range listItems(g, ns) {
			g.Expect(di.Annotations).NotTo(HaveKey(lsv1alpha1.ReconcileTimeAnnotation), "item %s", di.Name)
		}
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	versions := func(g Gomega) []string {
		out := []string{getExec(g, exec).ResourceVersion}
		for _, di := range listItems(g, ns) {
			out = append(out, di.ResourceVersion)
		}
		return out
	}
	settled := versions(g)
	g.Consistently(versions).WithTimeout(time.Second).WithPolling(100 * time.Millisecond).Should(Equal(settled))
}

func TestFailureStopsSuccessors(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)

	exec := newExecution(ns, "fail",
		mockItem("a", mockv1alpha1.ProviderConfiguration{}),
		mockItem("b", mockv1alpha1.ProviderConfiguration{Phase: "Failed"}, "a"),
		mockItem("c", mockv1alpha1.ProviderConfiguration{}, "b"),
		// independent and slow: still running when b fails; the execution waits for it
		mockItem("slow", mockv1alpha1.ProviderConfiguration{Delay: delay(1500 * time.Millisecond)}),
	)
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	done := waitFinished(t, exec)
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseFailed))
	g.Expect(done.Status.LastError).NotTo(BeNil())
	g.Expect(done.Status.LastError.Reason).To(Equal(execution.ReasonDeployItemsFailed))
	g.Expect(done.Status.LastError.Message).To(ContainSubstring("b"))
	// The failed item's own reason and message, not only its name.
	g.Expect(done.Status.LastError.Message).To(ContainSubstring("; b: MockFailed: "))

	g.Expect(getItem(g, ns, "fail", "b").Status.Phase).To(Equal(lsv1alpha1.PhaseFailed))
	slow := getItem(g, ns, "fail", "slow")
	g.Expect(slow.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded), "the running item was waited for")
	c := getItem(g, ns, "fail", "c")
	g.Expect(c.Status.JobID).To(BeEmpty(), "the successor of a failed item never starts")
	g.Expect(c.Status.Phase).To(BeEmpty())
}

func TestCycleAndUnknownDependencyRefusedBeforeAnyItemRuns(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	for name, tc := range map[string]struct {
		items  []lsv1alpha1.DeployItemTemplate
		code   lsv1alpha1.ErrorCode
		reason string
	}{
		"cycle": {
			items: []lsv1alpha1.DeployItemTemplate{
				mockItem("free", mockv1alpha1.ProviderConfiguration{}),
				mockItem("a", mockv1alpha1.ProviderConfiguration{}, "c"),
				mockItem("b", mockv1alpha1.ProviderConfiguration{}, "a"),
				mockItem("c", mockv1alpha1.ProviderConfiguration{}, "b"),
			},
			code: lsv1alpha1.ErrorCyclicDependencies, reason: execution.ReasonCyclicDependencies,
		},
		"unknown": {
			items: []lsv1alpha1.DeployItemTemplate{
				mockItem("free", mockv1alpha1.ProviderConfiguration{}),
				mockItem("a", mockv1alpha1.ProviderConfiguration{}, "ghost"),
			},
			code: lsv1alpha1.ErrorConfigurationProblem, reason: execution.ReasonUnknownDependencies,
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			exec := newExecution(ns, name, tc.items...)
			g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
			done := waitFinished(t, exec)
			g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseFailed))
			g.Expect(done.Status.LastError).NotTo(BeNil())
			g.Expect(done.Status.LastError.Codes).To(Equal([]lsv1alpha1.ErrorCode{tc.code}))
			g.Expect(done.Status.LastError.Reason).To(Equal(tc.reason))
			// not even the independent item was created, let alone started
			for _, di := range listItems(g, ns) {
				g.Expect(di.Labels[lsv1alpha1.ManagedByExecutionLabel]).NotTo(Equal(name))
			}
		})
	}

	t.Run("self dependency refused by the schema", func(t *testing.T) {
		exec := newExecution(ns, "self", mockItem("a", mockv1alpha1.ProviderConfiguration{}, "a"))
		err := env.Client.Create(ctx, exec)
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("cannot depend on itself")))
	})
}

func TestOrphansDeletedInReverseDependencyOrder(t *testing.T) {
	ns := newNamespace(t)
	rec := record(t, ns)
	startManager(t, ns, testOptions())
	g := NewWithT(t)

	exec := newExecution(ns, "orph",
		mockItem("a", mockv1alpha1.ProviderConfiguration{}),
		mockItem("b", mockv1alpha1.ProviderConfiguration{}, "a"),
		mockItem("c", mockv1alpha1.ProviderConfiguration{}, "b"),
		mockItem("keep", mockv1alpha1.ProviderConfiguration{}),
	)
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	first := waitFinished(t, exec)
	g.Expect(first.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))

	// drop a, b, c from the spec and start another job
	cur := getExec(g, exec)
	cur.Spec.DeployItems = cur.Spec.DeployItems[3:]
	cur.Annotations = map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationReconcile)}
	g.Expect(env.Client.Update(ctx, cur)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		g.Expect(cur.Status.JobID).NotTo(Equal(first.Status.JobID))
		g.Expect(cur.Status.JobIDFinished).To(Equal(cur.Status.JobID))
		g.Expect(cur.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())

	items := listItems(g, ns)
	g.Expect(items).To(HaveLen(1))
	g.Expect(items[0].Name).To(Equal("orph-keep"))
	// c goes before b is even marked for deletion, b before a
	rec.waitRecorded(t, gone("a"))
	g.Expect(rec.first(deletionStarted("b"))).To(BeNumerically(">", rec.first(gone("c"))))
	g.Expect(rec.first(deletionStarted("a"))).To(BeNumerically(">", rec.first(gone("b"))))
	g.Expect(rec.first(gone("c"))).To(BeNumerically(">=", 0))
}

// A new item is created with its reconcile-time stamp only when it is handed
// the job in the same reconcile: while an orphan's deletion holds the job up
// it waits unstamped (a stamp would start its pickup timeout before it has a
// job), and it is stamped and started once the orphan is gone.
func TestNewItemWaitsUnstampedWhileOrphansAreDeleted(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)

	exec := newExecution(ns, "swap", mockItem("old", mockv1alpha1.ProviderConfiguration{}))
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	first := waitFinished(t, exec)
	g.Expect(first.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	// A finalizer of someone else holds the old item's deletion.
	const hold = "test.terrace.dev/hold"
	// (Updates retried on conflict: the deployer may still be writing.)
	g.Eventually(func(g Gomega) {
		old := getItem(g, ns, "swap", "old")
		old.Finalizers = append(old.Finalizers, hold)
		g.Expect(env.Client.Update(ctx, old)).To(Succeed())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())

	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		cur.Spec.DeployItems = []lsv1alpha1.DeployItemTemplate{mockItem("new", mockv1alpha1.ProviderConfiguration{})}
		cur.Annotations = map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationReconcile)}
		g.Expect(env.Client.Update(ctx, cur)).To(Succeed())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getItem(g, ns, "swap", "old").DeletionTimestamp).NotTo(BeNil())
		g.Expect(getExec(g, exec).Status.Phase).To(Equal(lsv1alpha1.PhaseCleanupOrphaned))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	created := getItem(g, ns, "swap", "new")
	g.Expect(created.Annotations).NotTo(HaveKey(lsv1alpha1.ReconcileTimeAnnotation))
	g.Expect(created.Status.JobID).To(BeEmpty())

	g.Eventually(func(g Gomega) {
		old := getItem(g, ns, "swap", "old")
		old.Finalizers = slices.DeleteFunc(old.Finalizers, func(f string) bool { return f == hold })
		g.Expect(env.Client.Update(ctx, old)).To(Succeed())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		g.Expect(cur.Status.JobID).NotTo(Equal(first.Status.JobID))
		g.Expect(cur.Status.JobIDFinished).To(Equal(cur.Status.JobID))
		g.Expect(cur.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
		g.Expect(getItem(g, ns, "swap", "new").Status.JobIDFinished).To(Equal(cur.Status.JobID))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
}

func TestDeletionReverseOrderAndDeleteWithoutUninstall(t *testing.T) {
	ns := newNamespace(t)
	rec := record(t, ns)
	startManager(t, ns, testOptions())

	for _, withoutUninstall := range []bool{false, true} {
		name := "del"
		if withoutUninstall {
			name = "keep-installed"
		}
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			exec := newExecution(ns, name,
				mockItem("a", mockv1alpha1.ProviderConfiguration{Export: export(`"x"`)}),
				mockItem("b", mockv1alpha1.ProviderConfiguration{}, "a"),
				mockItem("c", mockv1alpha1.ProviderConfiguration{}, "b"),
			)
			g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
			g.Expect(waitFinished(t, exec).Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
			exportSecret := getItem(g, ns, name, "a").Status.ExportReference
			g.Expect(exportSecret).NotTo(BeNil())

			if withoutUninstall {
				cur := getExec(g, exec)
				if cur.Annotations == nil {
					cur.Annotations = map[string]string{}
				}
				cur.Annotations[lsv1alpha1.DeleteWithoutUninstallAnnotation] = "true"
				g.Expect(env.Client.Update(ctx, cur)).To(Succeed())
			}
			g.Expect(env.Client.Delete(ctx, exec)).To(Succeed())
			g.Eventually(func(g Gomega) {
				err := env.Client.Get(ctx, client.ObjectKeyFromObject(exec), &lsv1alpha1.Execution{})
				g.Expect(client.IgnoreNotFound(err)).To(Succeed())
				g.Expect(err).To(HaveOccurred(), "execution still there")
			}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())

			for _, di := range listItems(g, ns) {
				g.Expect(di.Labels[lsv1alpha1.ManagedByExecutionLabel]).NotTo(Equal(name))
			}
			inExec := func(f func(recorded) bool) func(recorded) bool {
				return func(e recorded) bool { return e.item.Labels[lsv1alpha1.ManagedByExecutionLabel] == name && f(e) }
			}
			rec.waitRecorded(t, inExec(gone("a")))
			g.Expect(rec.first(inExec(deletionStarted("b")))).To(BeNumerically(">", rec.first(inExec(gone("c")))))
			g.Expect(rec.first(inExec(deletionStarted("a")))).To(BeNumerically(">", rec.first(inExec(gone("b")))))

			// the mock deletes its export Secret on uninstall only
			err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: exportSecret.Name}, &corev1.Secret{})
			if withoutUninstall {
				g.Expect(err).NotTo(HaveOccurred(), "delete-without-uninstall keeps what the item installed")
				g.Expect(rec.first(inExec(func(e recorded) bool {
					return e.item.Annotations[lsv1alpha1.DeleteWithoutUninstallAnnotation] == "true"
				}))).To(BeNumerically(">=", 0), "annotation passed on to the items")
			} else {
				g.Expect(client.IgnoreNotFound(err)).To(Succeed())
				g.Expect(err).To(HaveOccurred(), "the export Secret was uninstalled")
			}
		})
	}
}

func TestInterrupt(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)

	// unserved has a type no deployer serves: it is never picked up.
	unserved := mockItem("unserved", mockv1alpha1.ProviderConfiguration{})
	unserved.Type = noDeployerType
	exec := newExecution(ns, "intr",
		mockItem("stuck", mockv1alpha1.ProviderConfiguration{Phase: "Progressing"}),
		mockItem("next", mockv1alpha1.ProviderConfiguration{}, "stuck"),
		unserved,
	)
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getItem(g, ns, "intr", "stuck").Status.Phase).To(Equal(lsv1alpha1.PhaseProgressing))
		g.Expect(getItem(g, ns, "intr", "unserved").Annotations).To(HaveKey(lsv1alpha1.ReconcileTimeAnnotation))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())

	cur := getExec(g, exec)
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	cur.Annotations[lsv1alpha1.OperationAnnotation] = string(lsv1alpha1.OperationInterrupt)
	g.Expect(env.Client.Update(ctx, cur)).To(Succeed())

	done := waitFinished(t, exec)
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseFailed))
	g.Expect(done.Status.LastError.Reason).To(Equal(lsv1alpha1.ReasonInterrupted))
	g.Expect(done.Status.LastError.Codes).To(Equal([]lsv1alpha1.ErrorCode{lsv1alpha1.ErrorInterrupted}))
	g.Eventually(func(g Gomega) {
		g.Expect(getExec(g, exec).Annotations).NotTo(HaveKey(lsv1alpha1.OperationAnnotation))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())

	stuck := getItem(g, ns, "intr", "stuck")
	g.Expect(stuck.Status.Phase).To(Equal(lsv1alpha1.PhaseFailed))
	g.Expect(stuck.Status.JobIDFinished).To(Equal(done.Status.JobID))
	g.Expect(stuck.Status.LastError).NotTo(BeNil())
	g.Expect(stuck.Status.LastError.Operation).To(Equal(lsv1alpha1.OperationInterrupted))
	g.Expect(stuck.Status.LastError.Reason).To(Equal(lsv1alpha1.ReasonInterrupted))
	g.Expect(stuck.Status.LastError.Message).To(ContainSubstring("interrupted"))
	g.Expect(getItem(g, ns, "intr", "next").Status.JobID).To(BeEmpty())
	// The never picked-up item ends Interrupted without its pickup stamp, so
	// the pickup timeout will not overwrite that later.
	g.Eventually(func(g Gomega) {
		item := getItem(g, ns, "intr", "unserved")
		g.Expect(item.Status.LastError).NotTo(BeNil())
		g.Expect(item.Status.LastError.Reason).To(Equal(lsv1alpha1.ReasonInterrupted))
		g.Expect(item.Annotations).NotTo(HaveKey(lsv1alpha1.ReconcileTimeAnnotation))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
}

func TestRestartMidJobFinishesWithoutDuplicates(t *testing.T) {
	ns := newNamespace(t)
	first := startManager(t, ns, testOptions())
	g := NewWithT(t)

	exec := newExecution(ns, "restart",
		mockItem("a", mockv1alpha1.ProviderConfiguration{}),
		mockItem("b", mockv1alpha1.ProviderConfiguration{Delay: delay(time.Second)}, "a"),
		mockItem("c", mockv1alpha1.ProviderConfiguration{}, "b"),
	)
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	var job string
	g.Eventually(func(g Gomega) {
		job = getExec(g, exec).Status.JobID
		g.Expect(getItem(g, ns, "restart", "b").Status.JobID).To(Equal(job))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	uids := map[string]string{}
	for _, di := range listItems(g, ns) {
		uids[di.Name] = string(di.UID)
	}
	first.stop() // killed mid-job: b running, c waiting

	startManager(t, ns, testOptions())
	done := waitFinished(t, exec)
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	g.Expect(done.Status.JobID).To(Equal(job), "the same job finished")
	items := listItems(g, ns)
	g.Expect(items).To(HaveLen(3))
	for _, di := range items {
		g.Expect(string(di.UID)).To(Equal(uids[di.Name]), "item %s was recreated", di.Name)
	}
}

func TestOwnedExecutionWaitsForItsInstallation(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)

	// owned by an installation: operation: reconcile is ignored (and removed);
	// the job comes from status.jobID, written by the installation controller
	exec := newExecution(ns, "owned", mockItem("a", mockv1alpha1.ProviderConfiguration{}))
	exec.Labels = map[string]string{lsv1alpha1.EncompassedByLabel: "root"}
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		g.Expect(cur.Annotations).NotTo(HaveKey(lsv1alpha1.OperationAnnotation))
		g.Expect(cur.Status.JobID).To(BeEmpty())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())

	cur := getExec(g, exec)
	cur.Status.JobID = "job-from-installation"
	g.Expect(env.Client.Status().Update(ctx, cur, client.FieldOwner("installation-controller"))).To(Succeed())
	done := waitFinished(t, exec)
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	g.Expect(done.Status.JobIDFinished).To(Equal("job-from-installation"))
	g.Expect(getItem(g, ns, "owned", "a").Status.JobIDFinished).To(Equal("job-from-installation"))
}

func TestBadMockConfigurationFailsTheExecution(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)
	bad := mockItem("bad", mockv1alpha1.ProviderConfiguration{})
	bad.Config.Raw = []byte(`{"apiVersion":"mock.deployer.landscaper.gardener.cloud/v1alpha1","kind":"ProviderConfiguration","phase":"Sideways"}`)
	exec := newExecution(ns, "badcfg", bad, mockItem("after", mockv1alpha1.ProviderConfiguration{}, "bad"))
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	done := waitFinished(t, exec)
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseFailed))
	g.Expect(getItem(g, ns, "badcfg", "bad").Status.LastError.Codes).To(ContainElement(lsv1alpha1.ErrorConfigurationProblem))
	g.Expect(getItem(g, ns, "badcfg", "after").Status.JobID).To(BeEmpty())
}

// A deletion the deployer cannot do (its Target is missing) ends DeleteFailed;
// delete-without-uninstall plus operation: reconcile then lets it complete.
func TestDeleteFailedThenDeleteWithoutUninstall(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)

	// base waits for broken (which depends on it) to be deleted: a deletion
	// that fails for good must fail the execution's deletion, not leave base
	// waiting for ever. broken records something installed (a provider
	// status) on a Target that then goes, so its uninstall cannot run (an
	// item that installed nothing is deleted without its Target).
	target := &lsv1alpha1.Target{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cluster"}, Spec: lsv1alpha1.TargetSpec{Type: "test/any"}}
	g.Expect(env.Client.Create(ctx, target)).To(Succeed())
	installed := &runtime.RawExtension{Raw: []byte(`{"apiVersion":"example.org/v1","kind":"Installed"}`)}
	broken := mockItem("broken", mockv1alpha1.ProviderConfiguration{ProviderStatus: installed}, "base")
	broken.Target = &lsv1alpha1.ObjectReference{Name: "cluster"}
	exec := newExecution(ns, "undeletable", mockItem("base", mockv1alpha1.ProviderConfiguration{}), broken)
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	g.Expect(waitFinished(t, exec).Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	g.Expect(env.Client.Delete(ctx, target)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(target), &lsv1alpha1.Target{}))
	}).WithTimeout(eventually).WithPolling(poll).Should(BeTrue())

	g.Expect(env.Client.Delete(ctx, exec)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		g.Expect(cur.Status.Phase).To(Equal(lsv1alpha1.PhaseDeleteFailed))
		g.Expect(cur.Status.JobIDFinished).To(Equal(cur.Status.JobID))
		g.Expect(cur.Status.LastError.Message).To(ContainSubstring("broken"))
		// Why: the item's own reason and message.
		g.Expect(cur.Status.LastError.Message).To(ContainSubstring("; broken: TargetNotFound: "))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())

	g.Expect(env.Client.Patch(ctx, getExec(g, exec), client.RawPatch("application/merge-patch+json", []byte(
		`{"metadata":{"annotations":{"landscaper.gardener.cloud/delete-without-uninstall":"true","landscaper.gardener.cloud/operation":"reconcile"}}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(exec), &lsv1alpha1.Execution{})
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		g.Expect(err).To(HaveOccurred(), "execution still there")
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
}

// An execution owned by an installation is deleted with the job its
// installation hands over.
func TestOwnedExecutionDeletionUsesHandedJob(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)

	exec := ownedExecution(g, ns, "owned-del", mockItem("a", mockv1alpha1.ProviderConfiguration{}))
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	handJob := func(job string) {
		g.Eventually(func(g Gomega) {
			cur := getExec(g, exec)
			cur.Status.JobID = job
			g.Expect(env.Client.Status().Update(ctx, cur, client.FieldOwner("installation-controller"))).To(Succeed())
		}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	}
	g.Eventually(func(g Gomega) {
		g.Expect(getExec(g, exec).Finalizers).To(ContainElement(lsv1alpha1.Finalizer))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	handJob("install-1")
	g.Expect(waitFinished(t, exec).Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))

	g.Expect(env.Client.Delete(ctx, exec)).To(Succeed())
	g.Consistently(func(g Gomega) {
		cur := getExec(g, exec)
		g.Expect(cur.Status.JobID).To(Equal("install-1"), "the controller writes no job ID of an owned execution")
		g.Expect(getItem(g, ns, "owned-del", "a").DeletionTimestamp).To(BeNil())
	}).WithTimeout(time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())

	handJob("delete-1")
	g.Eventually(func(g Gomega) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(exec), &lsv1alpha1.Execution{})
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		g.Expect(err).To(HaveOccurred(), "execution still there")
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
}

// ownedExecution is an execution named name controlled by an installation
// of the same name, which the test creates (no installation controller runs
// here: the installation only exists).
func ownedExecution(g Gomega, ns, name string, items ...lsv1alpha1.DeployItemTemplate) *lsv1alpha1.Execution {
	owner := &lsv1alpha1.Installation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: lsv1alpha1.InstallationSpec{Blueprint: lsv1alpha1.BlueprintDefinition{Inline: &lsv1alpha1.InlineBlueprint{
			Filesystem: map[string]string{lsv1alpha1.BlueprintFileName: "deployExecutions: []\n"},
		}}},
	}
	g.Expect(env.Client.Create(ctx, owner)).To(Succeed())
	exec := newExecution(ns, name, items...)
	exec.Annotations = nil
	exec.Labels = map[string]string{lsv1alpha1.EncompassedByLabel: name}
	g.Expect(controllerutil.SetControllerReference(owner, exec, env.Client.Scheme())).To(Succeed())
	return exec
}

// An owned execution whose installation is gone without running its
// deletion job (its finalizer removed by hand) is deleted by the garbage
// collector; nothing will hand it a deletion job, so it runs its own and
// deletes its items, instead of keeping its finalizer for ever.
func TestOwnedExecutionWhoseOwnerIsGoneDeletesItself(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)

	exec := ownedExecution(g, ns, "orphaned", mockItem("a", mockv1alpha1.ProviderConfiguration{}))
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		g.Expect(cur.Finalizers).To(ContainElement(lsv1alpha1.Finalizer))
		cur.Status.JobID = "install-1"
		g.Expect(env.Client.Status().Update(ctx, cur, client.FieldOwner("installation-controller"))).To(Succeed())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	g.Expect(waitFinished(t, exec).Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))

	// The owner goes (it carries no finalizer here), then the garbage
	// collector deletes the execution (envtest runs none: the test does).
	g.Expect(env.Client.Delete(ctx, &lsv1alpha1.Installation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orphaned"}})).To(Succeed())
	g.Expect(env.Client.Delete(ctx, exec)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(exec), &lsv1alpha1.Execution{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "execution still there: %v", err)
		items := &lsv1alpha1.DeployItemList{}
		g.Expect(env.Client.List(ctx, items, client.InNamespace(ns))).To(Succeed())
		g.Expect(items.Items).To(BeEmpty())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
}

// A deleted owned execution waits for its installation to hand over a
// deletion job. Should the installation go without handing one over (its
// finalizer removed by hand), this controller, which caches no installations,
// gets no event of it: it re-reads the installation while it waits
// (Options.OwnerRecheck), then runs its own deletion job.
func TestWaitingExecutionNoticesItsOwnerWentWithoutHandingOver(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions(func(o *controller.Options) { o.OwnerRecheck = 200 * time.Millisecond }))
	g := NewWithT(t)

	exec := ownedExecution(g, ns, "waiting", mockItem("a", mockv1alpha1.ProviderConfiguration{}))
	// The owner holds the installation controller's finalizer, so it stays
	// while the execution waits.
	owner := &lsv1alpha1.Installation{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(exec), owner)).To(Succeed())
	owner.Finalizers = []string{lsv1alpha1.Finalizer}
	g.Expect(env.Client.Update(ctx, owner)).To(Succeed())
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		g.Expect(cur.Finalizers).To(ContainElement(lsv1alpha1.Finalizer))
		cur.Status.JobID = "install-1"
		g.Expect(env.Client.Status().Update(ctx, cur, client.FieldOwner("installation-controller"))).To(Succeed())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	g.Expect(waitFinished(t, exec).Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))

	g.Expect(env.Client.Delete(ctx, exec)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(getExec(g, exec).Status.Conditions, execution.ConditionProgressing)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(execution.ReasonWaitingForJob))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())

	// The installation goes without handing over.
	g.Expect(env.Client.Patch(ctx, owner, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))).To(Succeed())
	g.Expect(env.Client.Delete(ctx, owner)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(exec), &lsv1alpha1.Execution{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "execution still there: %v", err)
		items := &lsv1alpha1.DeployItemList{}
		g.Expect(env.Client.List(ctx, items, client.InNamespace(ns))).To(Succeed())
		g.Expect(items.Items).To(BeEmpty())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
}

// An export that retrying cannot read (the Secret an item's exportRef names
// is gone) fails the job with ExportsFailed, instead of retrying Completing
// for ever.
func TestMissingExportSecretFailsTheJob(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)

	// No deployer serves the item: the test reports its outcome by hand.
	it := mockItem("a", mockv1alpha1.ProviderConfiguration{})
	it.Type = noDeployerType
	exec := newExecution(ns, "exports", it)
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	var job string
	g.Eventually(func(g Gomega) {
		job = getItem(g, ns, "exports", "a").Status.JobID
		g.Expect(job).NotTo(BeEmpty())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		di := getItem(g, ns, "exports", "a")
		di.Status.Phase, di.Status.JobIDFinished = lsv1alpha1.PhaseSucceeded, job
		di.Status.ExportReference = &lsv1alpha1.ObjectReference{Name: "gone-export", Namespace: ns}
		g.Expect(env.Client.Status().Update(ctx, di)).To(Succeed())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())

	done := waitFinished(t, exec)
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseFailed))
	g.Expect(done.Status.LastError.Reason).To(Equal(execution.ReasonExportsFailed))
	g.Expect(done.Status.LastError.Message).To(ContainSubstring("gone-export"))
	g.Expect(done.Status.LastError.Codes).To(ContainElement(lsv1alpha1.ErrorConfigurationProblem))
}
