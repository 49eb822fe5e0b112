package controller_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	mockv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/mock/v1alpha1"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/jobid"
	"github.com/terrace-dev/terrace/kit/metrics"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// testDeployer plays the deployer of mock items (lsv1alpha1.MockDeployItemType)
// in the tests' manager, so the execution controller is tested against the
// deployer contract without importing a deployer. It does what the tests rely
// on, as the mock deployer does:
//   - a job starts when status.jobID != status.jobIDFinished (while the item
//     runs a job, only with a fresh reconcile-time annotation): phase Init,
//     lastReconcileTime, the finalizer, and reconcile-time removed - after
//     the status write, in a metadata patch of its own;
//   - the provider configuration says how the job ends: phase Succeeded
//     (default), Failed (MockFailed) or Progressing (until aborted), after
//     delay (a requeue), with providerStatus copied and export written to
//     the Secret "<item>-export" (status.exportRef);
//   - operation: abort ends a running job Failed, as a progressing timeout
//     when the execution controller's abort reason says so;
//   - a deleted item uninstalls (deletes its export Secret) unless
//     delete-without-uninstall is "true"; an item that installed something
//     (a providerStatus) on a Target that is gone ends DeleteFailed
//     (TargetNotFound) until operation: reconcile asks for a retry.
//
// Writes are merge patches guarded by the resourceVersion read, events and
// the phase metric follow a successful write, and every reconcile is a span
// continuing the trace handed over with the item's job.
type testDeployer struct {
	client    client.Client
	apiReader client.Reader
	recorder  events.EventRecorder
	metrics   metrics.Recorder
}

const (
	testDeployerName = "mock-deployer"
	// reasonMockFailed is lastError.reason of an item whose configuration
	// asks for phase Failed.
	reasonMockFailed = "MockFailed"
	itemKind         = "DeployItem"
	exportKey        = "export"
)

// addTestDeployer registers the test deployer with mgr.
func addTestDeployer(mgr ctrl.Manager) error {
	d := &testDeployer{
		client:    mgr.GetClient(),
		apiReader: mgr.GetAPIReader(),
		recorder:  mgr.GetEventRecorder(testDeployerName),
		metrics:   metrics.For(itemKind),
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(testDeployerName).
		For(&lsv1alpha1.DeployItem{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			di, ok := o.(*lsv1alpha1.DeployItem)
			return ok && di.Spec.Type == lsv1alpha1.MockDeployItemType
		}))).
		Complete(d)
}

// itemWrite is what one reconcile changes on the item.
type itemWrite struct {
	orig, item      *lsv1alpha1.DeployItem
	removeAnns      []string
	addFinalizer    bool
	removeFinalizer bool
	events          [][2]string // type, reason; the note is the lastError's or the phase's
}

func (d *testDeployer) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	item := &lsv1alpha1.DeployItem{}
	if err := d.client.Get(ctx, req.NamespacedName, item); err != nil {
		if apierrors.IsNotFound(err) {
			d.metrics.Forget(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var traced client.Object = item
	job := item.Status.JobID
	if item.DeletionTimestamp == nil && !jobid.HasNewJob(item.Status.JobID, item.Status.JobIDFinished) {
		traced, job = &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: item.Namespace, Name: item.Name}}, ""
	}
	ctx, span := tracing.StartReconcile(ctx, otel.Tracer("test-deployer"), itemKind, traced, job)
	w := &itemWrite{orig: item, item: item.DeepCopy()}
	defer func() { tracing.EndReconcile(span, string(w.item.Status.Phase), retErr) }()

	st := item.Status
	switch {
	case item.DeletionTimestamp != nil:
		d.delete(ctx, w)
	case !jobid.HasNewJob(st.JobID, st.JobIDFinished):
		return ctrl.Result{}, nil // no job: nothing to do
	case jobRunning(st.Phase) && operationOf(item) == lsv1alpha1.OperationAbort:
		abort(w)
	case !jobRunning(st.Phase) || hasAnnotation(item, lsv1alpha1.ReconcileTimeAnnotation):
		start(w)
		res = d.run(ctx, w)
	default:
		res = d.run(ctx, w)
	}
	if err := d.write(ctx, w); err != nil {
		// Changed meanwhile (say failed by the execution controller): its
		// event brings the next reconcile.
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	d.report(w)
	return res, nil
}

func jobRunning(p lsv1alpha1.Phase) bool {
	return p == lsv1alpha1.PhaseInit || p == lsv1alpha1.PhaseProgressing
}

func operationOf(o client.Object) lsv1alpha1.Operation {
	return lsv1alpha1.Operation(o.GetAnnotations()[lsv1alpha1.OperationAnnotation])
}

func hasAnnotation(o client.Object, key string) bool {
	_, ok := o.GetAnnotations()[key]
	return ok
}

// start picks the item's job up.
func start(w *itemWrite) {
	now := metav1.Now()
	st := &w.item.Status
	st.Phase, st.LastReconcileTime, st.ObservedGeneration, st.LastError = lsv1alpha1.PhaseInit, &now, w.item.Generation, nil
	w.removeAnns = append(w.removeAnns, lsv1alpha1.ReconcileTimeAnnotation)
	w.addFinalizer = true
}

// run does what the provider configuration asks for.
func (d *testDeployer) run(ctx context.Context, w *itemWrite) ctrl.Result {
	cfg, err := parseMockConfig(w.item.Spec.Config)
	if err != nil {
		finish(w, lsv1alpha1.PhaseFailed, &lsv1alpha1.Error{Operation: "Reconcile", Reason: "InvalidConfiguration",
			Message: err.Error(), Codes: []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorConfigurationProblem}})
		return ctrl.Result{}
	}
	st := &w.item.Status
	if cfg.Delay != nil && st.LastReconcileTime != nil {
		if left := time.Until(st.LastReconcileTime.Add(cfg.Delay.Duration)); left > 0 {
			st.Phase = lsv1alpha1.PhaseProgressing
			return ctrl.Result{RequeueAfter: left}
		}
	}
	actx, span := tracing.StartStep(ctx, otel.Tracer("test-deployer"), itemKind, "Apply")
	err = d.apply(actx, w, cfg)
	tracing.EndStep(span, err)
	switch {
	case err != nil:
		finish(w, lsv1alpha1.PhaseFailed, &lsv1alpha1.Error{Operation: "Reconcile", Reason: "ExportFailed", Message: err.Error()})
	case cfg.Phase == string(lsv1alpha1.PhaseFailed):
		finish(w, lsv1alpha1.PhaseFailed, &lsv1alpha1.Error{Operation: "Reconcile", Reason: reasonMockFailed,
			Message: "spec.config.phase: the mock configuration asks for phase Failed",
			Codes:   []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorConfigurationProblem}})
	case cfg.Phase == string(lsv1alpha1.PhaseProgressing):
		st.Phase = lsv1alpha1.PhaseProgressing // until aborted
	default:
		finish(w, lsv1alpha1.PhaseSucceeded, nil)
	}
	return ctrl.Result{}
}

// apply copies the provider status and writes (or clears) the export.
func (d *testDeployer) apply(ctx context.Context, w *itemWrite, cfg *mockv1alpha1.ProviderConfiguration) error {
	st := &w.item.Status
	if cfg.ProviderStatus != nil {
		st.ProviderStatus = cfg.ProviderStatus.DeepCopy()
	}
	name := w.item.Name + "-export"
	if cfg.Export == nil {
		if st.ExportReference == nil {
			return nil
		}
		st.ExportReference = nil
		return client.IgnoreNotFound(d.client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.item.Namespace, Name: name}}))
	}
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": name, "namespace": w.item.Namespace, "ownerReferences": []any{map[string]any{
			"apiVersion": lsv1alpha1.SchemeGroupVersion.String(), "kind": itemKind, "name": w.item.Name, "uid": string(w.item.UID),
		}}},
		"stringData": map[string]any{exportKey: string(cfg.Export.Raw)},
	}}
	if err := d.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(secret), client.FieldOwner(testDeployerName), client.ForceOwnership); err != nil {
		return fmt.Errorf("writing export Secret %s: %w", name, err)
	}
	st.ExportReference = &lsv1alpha1.ObjectReference{Name: name, Namespace: w.item.Namespace}
	return nil
}

// abort ends the running job Failed: a progressing timeout when the
// execution controller's abort reason says so, else an abort on request.
func abort(w *itemWrite) {
	le := &lsv1alpha1.Error{Operation: "Abort", Reason: "Aborted", Message: "aborted on request (operation: abort)",
		Codes: []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorInterrupted}}
	if why := w.item.Annotations[lsv1alpha1.AbortReasonAnnotation]; why != "" {
		if r, detail, ok := strings.Cut(why, ": "); ok && r == lsv1alpha1.ReasonProgressingTimeout {
			le.Reason, le.Message, le.Codes = r, "aborted by the execution controller: "+detail, []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorTimeout}
		}
	}
	finish(w, lsv1alpha1.PhaseFailed, le)
	w.removeAnns = append(w.removeAnns, lsv1alpha1.OperationAnnotation, lsv1alpha1.AbortTimeAnnotation, lsv1alpha1.AbortReasonAnnotation)
}

// finish ends the job in phase, with lastErr for a failure.
func finish(w *itemWrite, phase lsv1alpha1.Phase, lastErr *lsv1alpha1.Error) {
	st := &w.item.Status
	st.Phase, st.JobIDFinished = phase, st.JobID
	if lastErr != nil {
		now := metav1.Now()
		lastErr.LastTransitionTime, lastErr.LastUpdateTime = now, now
		w.events = append(w.events, [2]string{corev1.EventTypeWarning, lastErr.Reason})
	}
	st.LastError = lastErr
	switch phase {
	case lsv1alpha1.PhaseSucceeded:
		w.events = append(w.events, [2]string{corev1.EventTypeNormal, string(phase)})
	default:
		w.events = append(w.events, [2]string{corev1.EventTypeWarning, string(phase)})
	}
}

// delete uninstalls a deleted item and lets it go, or ends its deletion
// DeleteFailed; a failed deletion stays so until operation: reconcile.
func (d *testDeployer) delete(ctx context.Context, w *itemWrite) {
	item := w.item
	if !controllerutil.ContainsFinalizer(item, lsv1alpha1.Finalizer) {
		return
	}
	retry := operationOf(item) == lsv1alpha1.OperationReconcile
	if item.Status.Phase == lsv1alpha1.PhaseDeleteFailed && !retry {
		return
	}
	if retry {
		w.removeAnns = append(w.removeAnns, lsv1alpha1.OperationAnnotation)
	}
	item.Status.Phase = lsv1alpha1.PhaseDeleting
	dctx, span := tracing.StartStep(ctx, otel.Tracer("test-deployer"), itemKind, "Delete")
	le := d.uninstall(dctx, item)
	if le != nil {
		tracing.EndStep(span, fmt.Errorf("%s", le.Message))
		finish(w, lsv1alpha1.PhaseDeleteFailed, le)
		return
	}
	tracing.EndStep(span, nil)
	w.removeFinalizer = true
}

// uninstall deletes what the item installed (its export Secret); with
// delete-without-uninstall nothing. It returns the deletion's lastError when
// what it installed lives on a Target that is gone.
func (d *testDeployer) uninstall(ctx context.Context, item *lsv1alpha1.DeployItem) *lsv1alpha1.Error {
	if item.Annotations[lsv1alpha1.DeleteWithoutUninstallAnnotation] == "true" {
		return nil
	}
	if t := item.Spec.Target; t != nil && item.Status.ProviderStatus != nil {
		err := d.apiReader.Get(ctx, client.ObjectKey{Namespace: item.Namespace, Name: t.Name}, &lsv1alpha1.Target{})
		if apierrors.IsNotFound(err) {
			return &lsv1alpha1.Error{Operation: "Delete", Reason: "TargetNotFound",
				Message: fmt.Sprintf("target %s not found: what the item installed cannot be uninstalled; "+
					"set delete-without-uninstall and operation: reconcile to delete it anyway", t.Name),
				Codes: []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorConfigurationProblem}}
		}
		if err != nil {
			return &lsv1alpha1.Error{Operation: "Delete", Reason: "TargetUnreadable", Message: err.Error()}
		}
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: item.Namespace, Name: item.Name + "-export"}}
	if err := client.IgnoreNotFound(d.client.Delete(ctx, secret)); err != nil {
		return &lsv1alpha1.Error{Operation: "Delete", Reason: "ExportNotDeleted", Message: err.Error()}
	}
	return nil
}

// write stores the status (a merge patch of the changed fields), then the
// metadata (annotations, finalizer), each guarded by the version it read.
func (d *testDeployer) write(ctx context.Context, w *itemWrite) error {
	cur := w.orig.DeepCopy()
	if !equality.Semantic.DeepEqual(w.orig.Status, w.item.Status) {
		cur.Status = w.item.Status
		if err := d.client.Status().Patch(ctx, cur, client.MergeFromWithOptions(w.orig, client.MergeFromWithOptimisticLock{}),
			client.FieldOwner(testDeployerName)); err != nil {
			return err
		}
	}
	base := cur.DeepCopy()
	for _, k := range w.removeAnns {
		delete(cur.Annotations, k)
	}
	if w.addFinalizer {
		controllerutil.AddFinalizer(cur, lsv1alpha1.Finalizer)
	}
	if w.removeFinalizer {
		controllerutil.RemoveFinalizer(cur, lsv1alpha1.Finalizer)
	}
	if equality.Semantic.DeepEqual(base.ObjectMeta, cur.ObjectMeta) {
		return nil
	}
	return d.client.Patch(ctx, cur, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}),
		client.FieldOwner(testDeployerName))
}

// report emits the events and the phase metric of a stored write.
func (d *testDeployer) report(w *itemWrite) {
	for _, e := range w.events {
		note := "job " + w.item.Status.JobID + " ended " + string(w.item.Status.Phase)
		if le := w.item.Status.LastError; le != nil && e[0] == corev1.EventTypeWarning {
			note = le.Message
		}
		d.recorder.Eventf(w.orig, nil, e[0], e[1], e[1], "%s", note)
	}
	if w.removeFinalizer {
		d.metrics.Forget(w.orig.Namespace, w.orig.Name)
		return
	}
	d.metrics.Phase(w.orig.Namespace, w.orig.Name, string(w.item.Status.Phase))
}

// parseMockConfig decodes a mock provider configuration strictly, as the
// mock deployer does.
func parseMockConfig(raw *runtime.RawExtension) (*mockv1alpha1.ProviderConfiguration, error) {
	cfg := &mockv1alpha1.ProviderConfiguration{}
	if raw == nil || len(bytes.TrimSpace(raw.Raw)) == 0 {
		return cfg, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw.Raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cfg); err != nil {
		return nil, fmt.Errorf("spec.config: not a valid mock ProviderConfiguration: %w", err)
	}
	switch lsv1alpha1.Phase(cfg.Phase) {
	case "", lsv1alpha1.PhaseSucceeded, lsv1alpha1.PhaseFailed, lsv1alpha1.PhaseProgressing:
		return cfg, nil
	default:
		return nil, fmt.Errorf("spec.config.phase: %q is not one of Succeeded, Failed, Progressing", cfg.Phase)
	}
}
