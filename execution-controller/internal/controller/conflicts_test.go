package controller_test

import (
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mockv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/mock/v1alpha1"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/controller"
	"github.com/terrace-dev/terrace/execution-controller/internal/controller/execution"
	"github.com/terrace-dev/terrace/kit/observabilitytest"
	"github.com/terrace-dev/terrace/kit/testlog"
)

// expectConfigFailure waits for exec's job to end Failed with reason and
// ERR_CONFIGURATION_PROBLEM, a message containing each of msg, and the
// reason's Warning event.
func expectConfigFailure(t *testing.T, exec *lsv1alpha1.Execution, reason string, msg ...string) {
	t.Helper()
	g := NewWithT(t)
	done := waitFinished(t, exec)
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseFailed))
	g.Expect(done.Status.LastError).NotTo(BeNil())
	g.Expect(done.Status.LastError.Reason).To(Equal(reason))
	g.Expect(done.Status.LastError.Codes).To(ContainElement(lsv1alpha1.ErrorConfigurationProblem))
	for _, m := range msg {
		g.Expect(done.Status.LastError.Message).To(ContainSubstring(m))
	}
	g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, env.Client, exec.Namespace, exec.Name) }).
		WithTimeout(eventually).WithPolling(poll).Should(ContainElement(corev1.EventTypeWarning + "/" + reason))
}

// Item names are "<execution>-<item>": execution "app-db" item "main" and
// execution "app" item "db-main" are both DeployItem "app-db-main". The
// second execution must not take the first one's item over (owner, spec), nor
// a user's own DeployItem of its item's name: its job fails with a
// configuration error naming the item and its controller, and the item is
// left as it was.
func TestItemNameClashFailsWithoutTakingTheItemOver(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)

	first := newExecution(ns, "app", mockItem("db-main", mockv1alpha1.ProviderConfiguration{Export: export(`"first"`)}))
	g.Expect(env.Client.Create(ctx, first)).To(Succeed())
	g.Expect(waitFinished(t, first).Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	before := getItem(g, ns, "app", "db-main")

	clash := newExecution(ns, "app-db", mockItem("main", mockv1alpha1.ProviderConfiguration{Export: export(`"second"`)}))
	g.Expect(env.Client.Create(ctx, clash)).To(Succeed())
	expectConfigFailure(t, clash, execution.ReasonDeployItemNameConflict, ns+"/app-db-main", "Execution app", string(getExec(g, first).UID))

	after := getItem(g, ns, "app", "db-main")
	g.Expect(metav1.GetControllerOf(after).UID).To(Equal(getExec(g, first).UID), "the item keeps its controller")
	g.Expect(after.Spec).To(Equal(before.Spec), "the item keeps its spec")
	g.Expect(after.Labels).To(Equal(before.Labels))

	// The owner's next job still runs its item.
	g.Expect(env.Client.Patch(ctx, getExec(g, first), client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"landscaper.gardener.cloud/operation":"reconcile"}}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		cur := getExec(g, first)
		g.Expect(cur.Status.JobIDFinished).To(Equal(cur.Status.JobID))
		g.Expect(cur.Status.JobID).NotTo(Equal(before.Status.JobID))
		g.Expect(cur.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())

	// A user's standalone DeployItem is not adopted either.
	solo := &lsv1alpha1.DeployItem{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "solo-x"},
		Spec:       lsv1alpha1.DeployItemSpec{Type: noDeployerType},
	}
	g.Expect(env.Client.Create(ctx, solo)).To(Succeed())
	adopter := newExecution(ns, "solo", mockItem("x", mockv1alpha1.ProviderConfiguration{}))
	g.Expect(env.Client.Create(ctx, adopter)).To(Succeed())
	expectConfigFailure(t, adopter, execution.ReasonDeployItemNameConflict, ns+"/solo-x", "controlled by nothing")
	cur := &lsv1alpha1.DeployItem{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(solo), cur)).To(Succeed())
	g.Expect(cur.OwnerReferences).To(BeEmpty())
	g.Expect(cur.Spec.Type).To(Equal(noDeployerType))
	g.Expect(cur.Labels).NotTo(HaveKey(lsv1alpha1.ManagedByExecutionLabel))

	// Nor one controlled by a kind of the same name in another group, named
	// like the execution: it is no earlier execution of this name, whose
	// item would go with it, so nothing frees the name and the job fails
	// at once (it does not wait for ever).
	foreign := &lsv1alpha1.DeployItem{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "foreign-x", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "example.com/v1", Kind: "Execution", Name: "foreign", UID: "4c9b6c9e-0000-4000-8000-000000000001",
			Controller: ptr.To(true),
		}}},
		Spec: lsv1alpha1.DeployItemSpec{Type: noDeployerType},
	}
	g.Expect(env.Client.Create(ctx, foreign)).To(Succeed())
	other := newExecution(ns, "foreign", mockItem("x", mockv1alpha1.ProviderConfiguration{}))
	g.Expect(env.Client.Create(ctx, other)).To(Succeed())
	expectConfigFailure(t, other, execution.ReasonDeployItemNameConflict, ns+"/foreign-x", "Execution foreign")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(foreign), cur)).To(Succeed())
	g.Expect(cur.OwnerReferences).To(Equal(foreign.OwnerReferences), "the item keeps its controller")
}

// An execution created again under the name of one whose item is still being
// deleted waits for that namesake to go, and says so: its job's Progressing
// condition (reason DeployItemNameTaken) and a Warning event. Once the
// namesake's deletion failed nothing frees the name: the job fails
// DeployItemNameConflict, quoting why the deletion failed. When the namesake
// has gone, the next job creates the item and runs it.
func TestNamesakeOnItsWayOutIsWaitedForUntilItsDeletionFails(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)

	// The item "again-a" of an earlier execution "again" (gone), being
	// deleted; its finalizer stands for a deployer still at work (no
	// deployer serves its type here).
	const hold = "test.terrace.dev/hold"
	namesake := &lsv1alpha1.DeployItem{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "again-a", Finalizers: []string{hold},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: lsv1alpha1.SchemeGroupVersion.String(), Kind: "Execution", Name: "again",
				UID: "0b7e4c1e-2222-4222-8333-444455556666", Controller: ptr.To(true),
			}}},
		Spec: lsv1alpha1.DeployItemSpec{Type: noDeployerType},
	}
	g.Expect(env.Client.Create(ctx, namesake)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, namesake)).To(Succeed())
	g.Expect(env.Client.Status().Patch(ctx, namesake, client.RawPatch("application/merge-patch+json",
		[]byte(`{"status":{"phase":"Deleting"}}`)))).To(Succeed())

	exec := newExecution(ns, "again", mockItem("a", mockv1alpha1.ProviderConfiguration{}))
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		c := meta.FindStatusCondition(cur.Status.Conditions, execution.ConditionProgressing)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(execution.ReasonDeployItemNameTaken))
		g.Expect(c.Message).To(ContainSubstring(ns + "/again-a"))
		g.Expect(cur.Status.LastError).To(BeNil(), "waiting is no failure")
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, env.Client, ns, "again") }).
		WithTimeout(eventually).WithPolling(poll).Should(ContainElement(corev1.EventTypeWarning + "/" + execution.ReasonDeployItemNameTaken))

	// The deployer gives up: the deletion failed, and the name stays taken.
	g.Expect(env.Client.Status().Patch(ctx, namesake, client.RawPatch("application/merge-patch+json", []byte(
		`{"status":{"phase":"DeleteFailed","lastError":{"operation":"Delete","reason":"TargetNotFound","message":"target gone-cluster not found",`+
			`"lastTransitionTime":"2026-01-02T03:04:05Z","lastUpdateTime":"2026-01-02T03:04:05Z"}}}`)))).To(Succeed())
	expectConfigFailure(t, exec, execution.ReasonDeployItemNameConflict,
		ns+"/again-a", "deletion failed", "TargetNotFound: target gone-cluster not found")

	// Once the namesake is gone, the next job creates the item and runs it.
	g.Expect(env.Client.Patch(ctx, namesake, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"finalizers":null}}`)))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(namesake), &lsv1alpha1.DeployItem{}))
	}).WithTimeout(eventually).WithPolling(poll).Should(BeTrue())
	g.Expect(reconcileAgain(t, exec, nil).Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	g.Expect(metav1.GetControllerOf(getItem(g, ns, "again", "a")).UID).To(Equal(getExec(g, exec).UID))
}

// goingNamesake creates the DeployItem name in ns, controlled by an
// Execution owner (uid) that is gone, and deletes it; its finalizer holds it
// (standing for a deployer still at work: no deployer serves its type) until
// the test releases it (releaseNamesake).
func goingNamesake(g Gomega, ns, name, owner, uid string) *lsv1alpha1.DeployItem {
	di := &lsv1alpha1.DeployItem{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: []string{"test.terrace.dev/hold"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: lsv1alpha1.SchemeGroupVersion.String(), Kind: "Execution", Name: owner,
				UID: types.UID(uid), Controller: ptr.To(true),
			}}},
		Spec: lsv1alpha1.DeployItemSpec{Type: noDeployerType},
	}
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
	return di
}

// releaseNamesake removes the finalizer of a namesake (a DeployItem or a
// DataObject) and waits until it is gone (the waiting execution may have
// written its own object of that name by then).
func releaseNamesake(g Gomega, o client.Object) {
	uid := o.GetUID()
	g.Expect(env.Client.Patch(ctx, o, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"finalizers":null}}`)))).To(Succeed())
	g.Eventually(func() bool {
		cur := o.DeepCopyObject().(client.Object)
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), cur)
		return apierrors.IsNotFound(err) || (err == nil && cur.GetUID() != uid)
	}).WithTimeout(eventually).WithPolling(poll).Should(BeTrue())
}

// expectNameTaken waits until exec's running job says it waits for the
// DeployItem name in ns (Progressing True, DeployItemNameTaken, no lastError).
func expectNameTaken(g Gomega, exec *lsv1alpha1.Execution, name string) {
	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		c := meta.FindStatusCondition(cur.Status.Conditions, execution.ConditionProgressing)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(execution.ReasonDeployItemNameTaken))
		g.Expect(c.Message).To(ContainSubstring(exec.Namespace + "/" + name))
		g.Expect(cur.Status.LastError).To(BeNil(), "waiting is no failure")
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
}

// A job waiting for a namesake to go is no failed reconcile: no "Reconciler
// error" (retried with back-off and logged, stack trace and all, on every
// retry), but one info line, and the Progressing condition says why it waits.
// The namesake's deletion wakes the execution through a watch, not through the
// safety-net requeue (an hour here): the item of an earlier execution of the
// same name (its controller's events reach the execution by name), and the
// item of another execution whose item maps to the same name (execution
// "app-db" item "main" and execution "app" item "db-main": its events reach
// "app" through the index of item names).
func TestNamesakeWaitIsNoErrorAndItsDeletionWakesTheJob(t *testing.T) {
	ns := newNamespace(t)
	_, logs := startManagerLogging(t, ns, testOptions(func(o *controller.Options) { o.NameRecheck = time.Hour }))
	g := NewWithT(t)

	earlier := goingNamesake(g, ns, "again-a", "again", "0b7e4c1e-3333-4222-8333-444455556666")
	other := goingNamesake(g, ns, "app-db-main", "app-db", "0b7e4c1e-4444-4222-8333-444455556666")
	again := newExecution(ns, "again", mockItem("a", mockv1alpha1.ProviderConfiguration{}))
	app := newExecution(ns, "app", mockItem("db-main", mockv1alpha1.ProviderConfiguration{}))
	g.Expect(env.Client.Create(ctx, again)).To(Succeed())
	g.Expect(env.Client.Create(ctx, app)).To(Succeed())

	wl := waitLog{logs: logs, ns: ns, msg: "waiting for a namesake deploy item to go"}
	cases := []struct {
		exec     *lsv1alpha1.Execution
		item     string
		namesake *lsv1alpha1.DeployItem
	}{{again, "a", earlier}, {app, "db-main", other}}
	for _, c := range cases {
		expectNameTaken(g, c.exec, c.namesake.Name)
		wl.expectWaiting(g, c.namesake.Name)
	}

	releaseNamesake(g, earlier)
	releaseNamesake(g, other)
	for _, c := range cases {
		g.Eventually(func(g Gomega) {
			cur := getExec(g, c.exec)
			g.Expect(cur.Status.JobIDFinished).To(Equal(cur.Status.JobID), "the job of %s goes on", c.exec.Name)
			g.Expect(cur.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
			g.Expect(meta.FindStatusCondition(cur.Status.Conditions, execution.ConditionProgressing).Reason).
				To(Equal(execution.ReasonSucceeded))
			g.Expect(metav1.GetControllerOf(getItem(g, ns, c.exec.Name, c.item)).UID).To(Equal(cur.UID))
		}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
		wl.expectLoggedOnce(g, c.namesake.Name)
	}
}

// An item created with the reconcile-time stamp before its job met a namesake
// to wait for loses the stamp again: it has no job yet, and a pickup timeout
// running meanwhile would fail it. The hand-over after the wait stamps it.
func TestNamesakeWaitLeavesNoStampedItemBehind(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions(func(o *controller.Options) { o.NameRecheck = time.Hour }))
	g := NewWithT(t)

	namesake := goingNamesake(g, ns, "wait-taken", "wait", "0b7e4c1e-5555-4222-8333-444455556666")
	free := mockItem("a-free", mockv1alpha1.ProviderConfiguration{})
	free.Type = noDeployerType // only the controller changes it
	// "a-free" comes first: it is created (stamped) before the wait is met.
	exec := newExecution(ns, "wait", free, mockItem("taken", mockv1alpha1.ProviderConfiguration{}))
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	expectNameTaken(g, exec, namesake.Name)
	g.Eventually(func(g Gomega) {
		di := getItem(g, ns, "wait", "a-free")
		g.Expect(di.Annotations).NotTo(HaveKey(lsv1alpha1.ReconcileTimeAnnotation))
		g.Expect(di.Status.JobID).To(BeEmpty())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())

	releaseNamesake(g, namesake)
	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		di := getItem(g, ns, "wait", "a-free")
		g.Expect(di.Status.JobID).To(Equal(cur.Status.JobID))
		g.Expect(di.Annotations).To(HaveKey(lsv1alpha1.ReconcileTimeAnnotation))
		g.Expect(metav1.GetControllerOf(getItem(g, ns, "wait", "taken")).UID).To(Equal(cur.UID))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
}

// A failed job start leaves no item with a reconcile-time stamp it will
// never be handed a job for (a later false PickupTimeout).
func TestNameClashLeavesNoStampedItemBehind(t *testing.T) {
	ns := newNamespace(t)
	// No deployer serves noDeployerType: only the stamp could change the item.
	startManager(t, ns, testOptions())
	g := NewWithT(t)
	g.Expect(env.Client.Create(ctx, &lsv1alpha1.DeployItem{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mix-taken"},
		Spec:       lsv1alpha1.DeployItemSpec{Type: noDeployerType},
	})).To(Succeed())
	free := mockItem("a-free", mockv1alpha1.ProviderConfiguration{})
	free.Type = noDeployerType
	// "a-free" comes first: it is created (stamped) before the clash is met.
	exec := newExecution(ns, "mix", free, mockItem("taken", mockv1alpha1.ProviderConfiguration{}))
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	expectConfigFailure(t, exec, execution.ReasonDeployItemNameConflict, ns+"/mix-taken")
	di := getItem(g, ns, "mix", "a-free")
	g.Expect(di.Annotations).NotTo(HaveKey(lsv1alpha1.ReconcileTimeAnnotation))
	g.Expect(di.Status.JobID).To(BeEmpty())
}

// A template the API server rejects (here a label key) fails the job with a
// configuration error instead of retrying the write for ever.
func TestRejectedItemTemplateFailsTheJob(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)

	bad := mockItem("bad", mockv1alpha1.ProviderConfiguration{})
	bad.Labels = map[string]string{"bad key!": "x"}
	exec := newExecution(ns, "rejected", bad)
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	expectConfigFailure(t, exec, execution.ReasonDeployItemInvalid, "rejected-bad", "bad key!")
	g.Expect(listItems(g, ns)).To(BeEmpty())
}

// The exports DataObject "<execution>-exports" controlled by something else
// (say a root installation exporting dataRef "app-exports") is left alone:
// the job fails with a configuration error instead of retrying for ever.
func TestForeignExportsDataObjectFailsTheJob(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)

	foreign := &lsv1alpha1.DataObject{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "exp-exports", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: lsv1alpha1.SchemeGroupVersion.String(), Kind: "Installation", Name: "app",
			UID: "0b7e4c1e-1111-4222-8333-444455556666", Controller: ptr.To(true),
		}}},
		Data: lsv1alpha1.AnyJSON{RawMessage: json.RawMessage(`"theirs"`)},
	}
	g.Expect(env.Client.Create(ctx, foreign)).To(Succeed())
	exec := newExecution(ns, "exp", mockItem("a", mockv1alpha1.ProviderConfiguration{Export: export(`"ours"`)}))
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	expectConfigFailure(t, exec, execution.ReasonDataObjectNameConflict, ns+"/exp-exports", "Installation app")

	cur := &lsv1alpha1.DataObject{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(foreign), cur)).To(Succeed())
	g.Expect(string(cur.Data.RawMessage)).To(Equal(`"theirs"`))
	g.Expect(cur.OwnerReferences).To(HaveLen(1))
	g.Expect(getExec(g, exec).Status.ExportReference).To(BeNil())
}

// goingDataObject creates the DataObject name in ns, controlled by a kind
// owner (uid) that is gone, and deletes it; its finalizer holds it (standing
// for whoever still needs it) until the test releases it (releaseNamesake).
func goingDataObject(g Gomega, ns, name, kind, owner, uid string) *lsv1alpha1.DataObject {
	do := &lsv1alpha1.DataObject{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: []string{"test.terrace.dev/hold"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: lsv1alpha1.SchemeGroupVersion.String(), Kind: kind, Name: owner,
				UID: types.UID(uid), Controller: ptr.To(true),
			}}},
		Data: lsv1alpha1.AnyJSON{RawMessage: json.RawMessage(`"earlier"`)},
	}
	g.Expect(env.Client.Create(ctx, do)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, do)).To(Succeed())
	return do
}

// An exports DataObject "<execution>-exports" on its way out (being deleted;
// here held by a finalizer) is waited for as a namesake deploy item is, not
// retried as an error: no "Reconciler error" (retried with back-off and
// logged on every retry), but one info line, a Warning event, and the job's
// Progressing condition (reason DataObjectNameTaken) says why it waits. Its
// deletion wakes the execution through the watch of DataObjects, not through
// the safety-net requeue (an hour here), whoever controls it: an earlier
// execution of the same name (gone), or an installation. The exports are then
// written anew and the job succeeds.
func TestExportsNamesakeWaitIsNoErrorAndItsDeletionWakesTheJob(t *testing.T) {
	ns := newNamespace(t)
	_, logs := startManagerLogging(t, ns, testOptions(func(o *controller.Options) { o.NameRecheck = time.Hour }))
	g := NewWithT(t)

	earlier := goingDataObject(g, ns, "again-exports", "Execution", "again", "0b7e4c1e-6666-4222-8333-444455556666")
	foreign := goingDataObject(g, ns, "inst-exports", "Installation", "inst", "0b7e4c1e-7777-4222-8333-444455556666")
	again := newExecution(ns, "again", mockItem("a", mockv1alpha1.ProviderConfiguration{Export: export(`"again"`)}))
	inst := newExecution(ns, "inst", mockItem("a", mockv1alpha1.ProviderConfiguration{Export: export(`"inst"`)}))
	g.Expect(env.Client.Create(ctx, again)).To(Succeed())
	g.Expect(env.Client.Create(ctx, inst)).To(Succeed())

	wl := waitLog{logs: logs, ns: ns, msg: "waiting for a namesake exports DataObject to go"}
	cases := []struct {
		exec       *lsv1alpha1.Execution
		namesake   *lsv1alpha1.DataObject
		controller string
		value      string
	}{{again, earlier, "Execution again", `"again"`}, {inst, foreign, "Installation inst", `"inst"`}}
	for _, c := range cases {
		g.Eventually(func(g Gomega) {
			cur := getExec(g, c.exec)
			g.Expect(cur.Status.Phase).To(Equal(lsv1alpha1.PhaseCompleting))
			p := meta.FindStatusCondition(cur.Status.Conditions, execution.ConditionProgressing)
			g.Expect(p).NotTo(BeNil())
			g.Expect(p.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(p.Reason).To(Equal(execution.ReasonDataObjectNameTaken))
			g.Expect(p.Message).To(ContainSubstring(ns + "/" + c.namesake.Name))
			g.Expect(p.Message).To(ContainSubstring(c.controller))
			g.Expect(cur.Status.LastError).To(BeNil(), "waiting is no failure")
		}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
		g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, env.Client, ns, c.exec.Name) }).
			WithTimeout(eventually).WithPolling(poll).
			Should(ContainElement(corev1.EventTypeWarning + "/" + execution.ReasonDataObjectNameTaken))
		wl.expectWaiting(g, c.namesake.Name)
	}

	releaseNamesake(g, earlier)
	releaseNamesake(g, foreign)
	for _, c := range cases {
		g.Eventually(func(g Gomega) {
			cur := getExec(g, c.exec)
			g.Expect(cur.Status.JobIDFinished).To(Equal(cur.Status.JobID), "the job of %s goes on", c.exec.Name)
			g.Expect(cur.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded), "lastError: %+v", cur.Status.LastError)
			g.Expect(meta.FindStatusCondition(cur.Status.Conditions, execution.ConditionProgressing).Reason).
				To(Equal(execution.ReasonSucceeded))
			g.Expect(cur.Status.ExportReference).To(Equal(&lsv1alpha1.ObjectReference{Name: c.namesake.Name, Namespace: ns}))
			do := &lsv1alpha1.DataObject{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c.namesake), do)).To(Succeed())
			g.Expect(string(do.Data.RawMessage)).To(MatchJSON(`{"a":` + c.value + `}`))
			g.Expect(metav1.GetControllerOf(do).UID).To(Equal(cur.UID))
		}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
		wl.expectLoggedOnce(g, c.namesake.Name)
	}
}

// An orphan whose deletion failed (its Target was missing) is asked to retry
// by the next job (operation: reconcile): once the cause is fixed, that job
// succeeds and the orphan is gone.
func TestFailedOrphanDeletionIsRetriedByTheNextJob(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)

	newTarget := func() *lsv1alpha1.Target {
		return &lsv1alpha1.Target{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cluster"}, Spec: lsv1alpha1.TargetSpec{Type: "test/any"}}
	}
	target := newTarget()
	g.Expect(env.Client.Create(ctx, target)).To(Succeed())
	installed := &runtime.RawExtension{Raw: []byte(`{"apiVersion":"example.org/v1","kind":"Installed"}`)}
	broken := mockItem("broken", mockv1alpha1.ProviderConfiguration{ProviderStatus: installed})
	broken.Target = &lsv1alpha1.ObjectReference{Name: "cluster"}
	exec := newExecution(ns, "retry", mockItem("keep", mockv1alpha1.ProviderConfiguration{}), broken)
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	g.Expect(waitFinished(t, exec).Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	g.Expect(env.Client.Delete(ctx, target)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(target), &lsv1alpha1.Target{}))
	}).WithTimeout(eventually).WithPolling(poll).Should(BeTrue())

	// broken leaves the spec: its deletion (the orphan cleanup) fails.
	rerun := func(prev string, edit func(*lsv1alpha1.Execution)) *lsv1alpha1.Execution {
		t.Helper()
		g.Eventually(func(g Gomega) {
			cur := getExec(g, exec)
			edit(cur)
			cur.Annotations = map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationReconcile)}
			g.Expect(env.Client.Update(ctx, cur)).To(Succeed())
		}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
		var done *lsv1alpha1.Execution
		g.Eventually(func(g Gomega) {
			done = getExec(g, exec)
			g.Expect(done.Status.JobID).NotTo(Equal(prev))
			g.Expect(done.Status.JobIDFinished).To(Equal(done.Status.JobID))
			g.Expect(done.Status.Phase.IsFinal()).To(BeTrue())
		}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
		return done
	}
	failed := rerun(getExec(g, exec).Status.JobID, func(e *lsv1alpha1.Execution) { e.Spec.DeployItems = e.Spec.DeployItems[:1] })
	g.Expect(failed.Status.Phase).To(Equal(lsv1alpha1.PhaseFailed))
	g.Expect(failed.Status.LastError.Reason).To(Equal(execution.ReasonOrphanDeleteFailed))

	// The cause is fixed: the next job retries the deletion and succeeds.
	g.Expect(env.Client.Create(ctx, newTarget())).To(Succeed())
	done := rerun(failed.Status.JobID, func(*lsv1alpha1.Execution) {})
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded), "lastError: %+v", done.Status.LastError)
	g.Eventually(func(g Gomega) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "retry-broken"}, &lsv1alpha1.DeployItem{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "orphan still there: %v", err)
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
}

// An item the controller created and then updates drops what the template
// dropped (a dependsOn, a label, spec.timeout): the update's apply owns every
// field the create wrote.
func TestUpdatedItemDropsWhatTheTemplateDropped(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)

	b := mockItem("b", mockv1alpha1.ProviderConfiguration{}, "a")
	b.Labels = map[string]string{"tier": "web"}
	b.Timeout = ptr.To(lsv1alpha1.Duration("1m"))
	exec := newExecution(ns, "edit", mockItem("a", mockv1alpha1.ProviderConfiguration{}), b)
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	first := waitFinished(t, exec)
	g.Expect(first.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	created := getItem(g, ns, "edit", "b")
	g.Expect(created.Annotations).To(HaveKeyWithValue(lsv1alpha1.DependsOnAnnotation, "a"))
	g.Expect(created.Labels).To(HaveKeyWithValue("tier", "web"))

	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		cur.Spec.DeployItems[1].DependsOn = nil
		cur.Spec.DeployItems[1].Labels = nil
		cur.Spec.DeployItems[1].Timeout = nil
		cur.Annotations = map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationReconcile)}
		g.Expect(env.Client.Update(ctx, cur)).To(Succeed())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		g.Expect(cur.Status.JobID).NotTo(Equal(first.Status.JobID))
		g.Expect(cur.Status.JobIDFinished).To(Equal(cur.Status.JobID))
		g.Expect(cur.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	updated := getItem(g, ns, "edit", "b")
	g.Expect(updated.UID).To(Equal(created.UID))
	g.Expect(updated.Annotations).NotTo(HaveKey(lsv1alpha1.DependsOnAnnotation))
	g.Expect(updated.Labels).NotTo(HaveKey("tier"))
	g.Expect(updated.Spec.Timeout).To(BeNil())
}

// An item of the execution that the execution's cache does not show under its
// item name (here its item-name label was removed by hand) exists already when
// the next job creates it: it is re-read and carried on with as the item it
// is (label restored, same object, run by the job), neither overwritten
// blindly nor deleted as an orphan.
func TestExistingOwnItemIsNotCreatedTwice(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)

	exec := newExecution(ns, "relabel", mockItem("a", mockv1alpha1.ProviderConfiguration{}))
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	first := waitFinished(t, exec)
	g.Expect(first.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	before := getItem(g, ns, "relabel", "a")
	g.Expect(env.Client.Patch(ctx, before, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"`+lsv1alpha1.ExecutionItemNameLabel+`":null}}}`)))).To(Succeed())

	g.Expect(env.Client.Patch(ctx, getExec(g, exec), client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"landscaper.gardener.cloud/operation":"reconcile"}}}`)))).To(Succeed())
	var done *lsv1alpha1.Execution
	g.Eventually(func(g Gomega) {
		done = getExec(g, exec)
		g.Expect(done.Status.JobID).NotTo(Equal(first.Status.JobID))
		g.Expect(done.Status.JobIDFinished).To(Equal(done.Status.JobID))
		g.Expect(done.Status.Phase.IsFinal()).To(BeTrue())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded), "lastError: %+v", done.Status.LastError)
	after := getItem(g, ns, "relabel", "a")
	g.Expect(after.UID).To(Equal(before.UID))
	g.Expect(after.DeletionTimestamp).To(BeNil())
	g.Expect(after.Labels).To(HaveKeyWithValue(lsv1alpha1.ExecutionItemNameLabel, "a"))
	g.Expect(after.Status.JobIDFinished).To(Equal(done.Status.JobID))
}

// waitLog reads, in a manager's log, a job's wait for a namesake object to go
// (logged with msg) and the reconcile errors naming that object.
type waitLog struct {
	logs    *testlog.Buffer
	ns, msg string
}

func (w waitLog) waits(name string) []string {
	return w.logs.Lines(`"msg":"`+w.msg+`"`, w.ns+"/"+name)
}

func (w waitLog) errs(name string) []string {
	return w.logs.Lines(`"Reconciler error"`, w.ns+"/"+name)
}

// expectWaiting: the wait for namesake name is logged, and is no reconcile
// error.
func (w waitLog) expectWaiting(g Gomega, name string) {
	g.Eventually(func(g Gomega) {
		g.Expect(w.errs(name)).To(BeEmpty(), "the wait is no reconcile error")
		g.Expect(w.waits(name)).NotTo(BeEmpty(), "the wait is logged")
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
}

// expectLoggedOnce: once the wait is over, it was logged once in all, never
// as a reconcile error.
func (w waitLog) expectLoggedOnce(g Gomega, name string) {
	g.Expect(w.errs(name)).To(BeEmpty())
	g.Expect(w.waits(name)).To(HaveLen(1), "logged once, not on every reconcile")
}
