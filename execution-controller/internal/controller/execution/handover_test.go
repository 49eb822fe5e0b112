package execution

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/depgraph"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/status"
)

// The moment right after a hand-over, driven by hand: the controller has
// handed job j2 to item b (its writes replaced b's resourceVersion "100"),
// and the cache still shows b at "100", finished with its earlier job j1.
// Nothing here needs the API server: no reconcile in this state may write
// anything, so the reconciler has no client (a request would panic).

const (
	oldJob = "j1"
	newJob = "j2"
)

func finishedItem(name, job, rv string, phase lsv1alpha1.Phase) *lsv1alpha1.DeployItem {
	di := &lsv1alpha1.DeployItem{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "exec-" + name, ResourceVersion: rv}}
	di.Status.JobID, di.Status.JobIDFinished, di.Status.Phase = job, job, phase
	if phase == lsv1alpha1.PhaseFailed {
		di.Status.LastError = &lsv1alpha1.Error{Reason: "Broken", Message: "it broke"}
	}
	return di
}

// justHandedOver is a reconciler and the state of one reconcile of execution
// "exec" running j2 over items a and b: a failed j2, b was just handed j2 by
// this reconciler (when handedOverB) but the cache shows it from before.
func justHandedOver(handedOverB bool, annotations map[string]string) (*Reconciler, *scope) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := &Reconciler{Recorder: events.NewFakeRecorder(10), Now: func() time.Time { return now }}
	b := finishedItem("b", oldJob, "100", lsv1alpha1.PhaseSucceeded)
	if handedOverB {
		r.handedOver.Replaced(client.ObjectKeyFromObject(b), "100")
	}
	exec := &lsv1alpha1.Execution{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "exec", Annotations: annotations}}
	exec.Status.JobID, exec.Status.JobIDFinished, exec.Status.Phase = newJob, oldJob, lsv1alpha1.PhaseProgressing
	p, err := status.NewPatcher(r.Client, exec, status.Apply())
	if err != nil {
		panic(err)
	}
	s := &scope{exec: exec, status: p, items: map[string]*lsv1alpha1.DeployItem{
		"a": finishedItem("a", newJob, "200", lsv1alpha1.PhaseFailed),
		"b": b,
	}}
	return r, s
}

// A failed sibling does not end the job while the item just handed the job
// runs it: the cache's old copy of that item does not count as "not running".
func TestJustHandedItemCountsAsRunning(t *testing.T) {
	g := depgraph.Graph{"a": nil, "b": nil}

	r, s := justHandedOver(true, nil)
	done, err := r.progress(context.Background(), s, g, newJob)
	if err != nil || done {
		t.Fatalf("progress = %v, %v", done, err)
	}
	if st := s.exec.Status; st.JobIDFinished == newJob || st.Phase != lsv1alpha1.PhaseProgressing {
		t.Fatalf("job ended (phase %s, jobIDFinished %s) while b runs it", st.Phase, st.JobIDFinished)
	}

	// The same cache state without the hand-over (b is not running): the
	// job ends Failed with a's failure.
	r, s = justHandedOver(false, nil)
	if _, err := r.progress(context.Background(), s, g, newJob); err != nil {
		t.Fatal(err)
	}
	if st := s.exec.Status; st.JobIDFinished != newJob || st.Phase != lsv1alpha1.PhaseFailed {
		t.Fatalf("job not ended without b running: phase %s, jobIDFinished %s", st.Phase, st.JobIDFinished)
	}
}

// An interrupt right after a hand-over waits for the cache to show it,
// instead of ending the job while skipping the item that runs it: nothing
// is written, and the annotation stays for the next reconcile.
func TestInterruptWaitsForAHandOverTheCacheDoesNotShow(t *testing.T) {
	interrupt := map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationInterrupt)}
	r, s := justHandedOver(true, interrupt)
	var writes []string
	var err error
	r.Client = writeRecorder{writes: &writes}
	if s.status, err = status.NewPatcher(r.Client, s.exec, status.Apply()); err != nil {
		t.Fatal(err)
	}
	var res flow.Result
	res, err = r.handleInterrupt(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Stopped() {
		t.Error("the reconcile goes on (and could hand over further items) with the interrupt pending")
	}
	if st := s.exec.Status; st.JobIDFinished == newJob || st.Phase != lsv1alpha1.PhaseProgressing || st.LastError != nil {
		t.Errorf("job ended (phase %s, jobIDFinished %s) without interrupting b", st.Phase, st.JobIDFinished)
	}
	// The end of the reconcile writes nothing: no status change, and no
	// write (the annotation's removal) queued after it.
	if err := s.status.Patch(context.Background(), s.exec); err != nil || len(writes) > 0 {
		t.Errorf("writes %v (%v) though nothing was interrupted", writes, err)
	}
}

// writeRecorder is a client that records writes and serves nothing else:
// any read or other call panics, so the test sees every request the
// reconcile would send.
type writeRecorder struct {
	client.Client
	writes *[]string
}

func (c writeRecorder) Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := lsv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

func (c writeRecorder) Patch(_ context.Context, obj client.Object, _ client.Patch, _ ...client.PatchOption) error {
	*c.writes = append(*c.writes, obj.GetName())
	return nil
}

func (c writeRecorder) Status() client.SubResourceWriter { return statusRecorder(c) }

type statusRecorder writeRecorder

func (c statusRecorder) Create(context.Context, client.Object, client.Object, ...client.SubResourceCreateOption) error {
	panic("unexpected status create")
}

func (c statusRecorder) Update(context.Context, client.Object, ...client.SubResourceUpdateOption) error {
	panic("unexpected status update")
}

func (c statusRecorder) Patch(_ context.Context, obj client.Object, _ client.Patch, _ ...client.SubResourcePatchOption) error {
	*c.writes = append(*c.writes, obj.GetName()+"/status")
	return nil
}

func (c statusRecorder) Apply(_ context.Context, _ runtime.ApplyConfiguration, _ ...client.SubResourceApplyOption) error {
	*c.writes = append(*c.writes, "status apply")
	return nil
}
