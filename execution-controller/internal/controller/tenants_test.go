package controller_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mockv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/mock/v1alpha1"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/controller/execution"
	"github.com/terrace-dev/terrace/execution-controller/internal/notes"
	"github.com/terrace-dev/terrace/kit/status"
)

// expectOtherTenantCompletes runs an execution with an export in ns (another
// tenant's namespace, watched by the same manager) and expects it to succeed.
func expectOtherTenantCompletes(t *testing.T, ns string) {
	t.Helper()
	g := NewWithT(t)
	other := newExecution(ns, "neighbour", mockItem("a", mockv1alpha1.ProviderConfiguration{Export: export(`"fine"`)}))
	g.Expect(env.Client.Create(ctx, other)).To(Succeed())
	done := waitFinished(t, other)
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded), "lastError: %+v", done.Status.LastError)
	g.Expect(done.Status.ExportReference).NotTo(BeNil())
}

// rerun asks for a new job of exec (operation: reconcile) and waits for it to end.
func rerun(t *testing.T, exec *lsv1alpha1.Execution) *lsv1alpha1.Execution {
	t.Helper()
	g := NewWithT(t)
	before := getExec(g, exec).Status.JobIDFinished
	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		cur.Annotations = map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationReconcile)}
		g.Expect(env.Client.Update(ctx, cur)).To(Succeed())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	var done *lsv1alpha1.Execution
	g.Eventually(func(g Gomega) {
		done = waitFinished(t, exec)
		g.Expect(done.Status.JobIDFinished).NotTo(Equal(before))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	return done
}

// An exports DataObject deleted and created again by someone else, with the
// labels and owner reference of the one the controller wrote copied onto it,
// is not written over: the next job fails with DataObjectNameConflict and
// the object keeps its data. Another tenant's execution completes meanwhile.
func TestRecreatedExportsDataObjectIsNotAdopted(t *testing.T) {
	ns, otherNS := newNamespace(t), newNamespace(t)
	startManagerIn(t, testOptions(), ns, otherNS)
	g := NewWithT(t)

	exec := newExecution(ns, "app", mockItem("a", mockv1alpha1.ProviderConfiguration{Export: export(`"ours"`)}))
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	g.Expect(waitFinished(t, exec).Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))

	written := &lsv1alpha1.DataObject{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app-exports"}, written)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, written)).To(Succeed())
	forged := &lsv1alpha1.DataObject{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: written.Name,
			Labels: written.Labels, OwnerReferences: written.OwnerReferences},
		Data: lsv1alpha1.AnyJSON{RawMessage: json.RawMessage(`"theirs"`)},
	}
	g.Eventually(func() error { return env.Client.Create(ctx, forged) }).WithTimeout(eventually).WithPolling(poll).Should(Succeed())

	done := rerun(t, exec)
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseFailed))
	g.Expect(done.Status.LastError.Reason).To(Equal(execution.ReasonDataObjectNameConflict))
	g.Expect(done.Status.LastError.Message).To(And(ContainSubstring(ns+"/app-exports"),
		ContainSubstring("was not written by execution-controller")))
	cur := &lsv1alpha1.DataObject{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(forged), cur)).To(Succeed())
	g.Expect(string(cur.Data.RawMessage)).To(Equal(`"theirs"`))

	expectOtherTenantCompletes(t, otherNS)
}

// A Secret an item's exportRef names that the item does not own (created
// by someone else under the export's name) is not read: the job fails with
// ExportsFailed, naming the Secret but never quoting its value, and no
// exports DataObject carries it. Another tenant's execution completes.
func TestForeignExportSecretIsNotRead(t *testing.T) {
	ns, otherNS := newNamespace(t), newNamespace(t)
	startManagerIn(t, testOptions(), ns, otherNS)
	g := NewWithT(t)

	const value = "s3cr3t-value"
	foreign := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "exports-a-export"},
		StringData: map[string]string{"export": `{"password":"` + value + `"}`},
	}
	g.Expect(env.Client.Create(ctx, foreign)).To(Succeed())

	// No deployer serves the item: the test reports its outcome, naming the
	// foreign Secret, as a deployer whose Secret was swapped would.
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
		di.Status.ExportReference = &lsv1alpha1.ObjectReference{Name: foreign.Name, Namespace: ns}
		g.Expect(env.Client.Status().Update(ctx, di)).To(Succeed())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())

	done := waitFinished(t, exec)
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseFailed))
	g.Expect(done.Status.LastError.Reason).To(Equal(execution.ReasonExportsFailed))
	g.Expect(done.Status.LastError.Message).To(And(ContainSubstring(foreign.Name), ContainSubstring("not owned by the item"),
		Not(ContainSubstring(value))))
	g.Expect(done.Status.ExportReference).To(BeNil())
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "exports-exports"}, &lsv1alpha1.DataObject{})
	g.Expect(client.IgnoreNotFound(err)).To(Succeed())
	g.Expect(err).To(HaveOccurred(), "no exports DataObject is written")

	expectOtherTenantCompletes(t, otherNS)
}

// eventNotes returns the notes of the Events on the execution name with reason.
func eventNotes(g Gomega, ns, name, reason string) []string {
	var list eventsv1.EventList
	g.Expect(env.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			out = append(out, e.Note)
		}
	}
	return out
}

// A template the API server refuses with a message longer than any status
// field may hold (it quotes each of 128 bad label values) still ends the job
// Failed: the lastError and condition messages are cut to status.MaxMessage
// and the Events' notes to notes.MaxEventNote, each keeping its start and
// end, instead of a status write the API server refuses (a job that never
// ends) and Events it drops.
func TestLongMessagesAreCutToTheirBounds(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)

	bad := mockItem("bad", mockv1alpha1.ProviderConfiguration{})
	bad.Labels = map[string]string{}
	for i := range 128 {
		// Distinct (the API server says each once), invalid (the leading
		// dash), and within the schema's 63 bytes.
		bad.Labels[fmt.Sprintf("k%03d", i)] = fmt.Sprintf("-%03d", i) + strings.Repeat("x", 59)
	}
	exec := newExecution(ns, "loud", bad)
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())

	done := waitFinished(t, exec)
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseFailed))
	le := done.Status.LastError
	g.Expect(le.Reason).To(Equal(execution.ReasonDeployItemInvalid))
	g.Expect(len(le.Message)).To(BeNumerically("<=", status.MaxMessage))
	g.Expect(le.Message).To(And(HavePrefix("deploy item loud-bad (item bad) refused by the API server"), ContainSubstring(" … ")))
	var ready metav1.Condition
	for _, c := range done.Status.Conditions {
		g.Expect(len(c.Message)).To(BeNumerically("<=", status.MaxMessage), "condition %s", c.Type)
		if c.Type == lsv1alpha1.ConditionReady {
			ready = c
		}
	}
	g.Expect(ready.Message).To(Equal(le.Message))

	for _, reason := range []string{execution.ReasonDeployItemInvalid, execution.ReasonFailed} {
		g.Eventually(func(g Gomega) {
			evs := eventNotes(g, ns, "loud", reason)
			g.Expect(evs).NotTo(BeEmpty(), "no %s Event", reason)
			for _, n := range evs {
				g.Expect(len(n)).To(BeNumerically("<=", notes.MaxEventNote))
				g.Expect(n).To(ContainSubstring(" … "))
			}
		}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	}
}
