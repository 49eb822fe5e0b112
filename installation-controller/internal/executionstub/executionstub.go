// Package executionstub plays the execution controller in the installation
// controller's tests, so that they run without that binary: for each
// Execution handed a job (status.jobID != status.jobIDFinished) it writes the
// status the execution controller would write when the job ends, read from
// the mock provider configurations of its deploy items. It creates no
// DeployItems and emits no events; what those do is the execution
// controller's and the deployers' own tests' (and the e2e suite's) business.
//
// What each item's configuration (mockv1alpha1.ProviderConfiguration) means
// here, as with the mock deployer:
//   - phase Succeeded (default) or Failed ends the job so (Failed: the
//     execution ends Failed, DeployItemsFailed, naming the item);
//   - phase Progressing keeps the job running until operation: interrupt,
//     which ends it Failed (Interrupted);
//   - delay keeps the job running that long first (a requeue, not a sleep);
//   - export is published in the execution's exports DataObject
//     ("<execution>-exports", {item: export}), named by status.exportRef.
//
// Items whose dependsOn form a cycle fail the job (CyclicDependencies).
// A deletion job deletes the execution (its finalizer goes) unless an item
// names a Target that is gone and the execution is not marked
// delete-without-uninstall: it then ends DeleteFailed (TargetNotFound).
//
// Invariants: the stub writes only the status fields the execution
// controller owns (never status.jobID, the installation controller's), with
// a merge patch guarded by the resourceVersion read, so a write computed from
// a stale copy conflicts and is retried on the newer one. It is event-driven:
// Executions, their owners' deletion and Targets wake it.
package executionstub

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	mockv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/mock/v1alpha1"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// FieldManager is the field manager of the stub's writes (the execution
// controller's name).
const FieldManager = "execution-controller"

// Reasons and operations of the lastErrors the stub writes, as the execution
// controller names them.
const (
	ReasonDeployItemsFailed  = "DeployItemsFailed"
	ReasonCyclicDependencies = "CyclicDependencies"
	ReasonDeleteFailed       = "DeleteFailed"
	ReasonTargetNotFound     = "TargetNotFound"
	ReasonMockFailed         = "MockFailed"
	OperationReconcile       = "Reconcile"
	OperationDelete          = "Delete"
)

// deleteFailedHint ends an item's failed deletion message, as the deployer
// library words it.
var deleteFailedHint = fmt.Sprintf("; fix the cause and retry the deletion with the annotation %s: %s, or annotate the item with %s: \"true\" to delete it without uninstalling",
	lsv1alpha1.OperationAnnotation, lsv1alpha1.OperationReconcile, lsv1alpha1.DeleteWithoutUninstallAnnotation)

// ExportsName names the DataObject holding an execution's exports.
func ExportsName(exec string) string { return exec + "-exports" }

// Stub reconciles Executions in place of the execution controller.
type Stub struct {
	client client.Client
	now    func() time.Time

	mu sync.Mutex
	// started remembers when the stub first saw each running job (for
	// delay); keyed by execution and job.
	started map[string]time.Time
}

// AddToManager registers the stub with mgr.
func AddToManager(mgr ctrl.Manager) error {
	s := &Stub{client: mgr.GetClient(), now: time.Now, started: map[string]time.Time{}}
	return ctrl.NewControllerManagedBy(mgr).
		Named("execution-stub").
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		For(&lsv1alpha1.Execution{}).
		// An owner gone without handing a deletion job over frees its
		// execution (the execution controller re-reads its owner now and
		// then); the installation controller names the execution after it.
		Watches(&lsv1alpha1.Installation{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []ctrl.Request {
			return []ctrl.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}}
		})).
		// A Target appearing again lets a failed deletion be retried.
		Watches(&lsv1alpha1.Target{}, handler.EnqueueRequestsFromMapFunc(s.executionsIn)).
		Complete(s)
}

func (s *Stub) executionsIn(ctx context.Context, o client.Object) []ctrl.Request {
	list := &lsv1alpha1.ExecutionList{}
	if err := s.client.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	reqs := make([]ctrl.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// Reconcile runs the job an execution was handed, if any.
func (s *Stub) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	exec := &lsv1alpha1.Execution{}
	if err := s.client.Get(ctx, req.NamespacedName, exec); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	st := exec.Status
	running := st.JobID != "" && st.JobID != st.JobIDFinished
	if lsv1alpha1.Operation(exec.Annotations[lsv1alpha1.OperationAnnotation]) == lsv1alpha1.OperationInterrupt {
		return ctrl.Result{}, s.interrupt(ctx, exec, running)
	}
	switch {
	case running && (exec.DeletionTimestamp == nil || st.Phase == lsv1alpha1.PhaseProgressing):
		// A running install job finishes first, also when the execution
		// is deleted meanwhile.
		return s.install(ctx, exec)
	case running:
		return ctrl.Result{}, s.delete(ctx, exec)
	case exec.DeletionTimestamp != nil:
		return ctrl.Result{}, s.deleteIfOwnerGone(ctx, exec)
	}
	return ctrl.Result{}, nil
}

// interrupt ends the running job Failed (Interrupted) and removes the
// annotation.
func (s *Stub) interrupt(ctx context.Context, exec *lsv1alpha1.Execution, running bool) error {
	if running {
		st := exec.Status
		msg := fmt.Sprintf("job %s was interrupted by operation: interrupt on execution %s", st.JobID, exec.Name)
		if err := s.finish(ctx, exec, lsv1alpha1.PhaseFailed, &lsv1alpha1.Error{Operation: OperationReconcile,
			Reason: lsv1alpha1.ReasonInterrupted, Message: msg, Codes: []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorInterrupted}}, nil); err != nil {
			return err
		}
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, lsv1alpha1.OperationAnnotation))
	return client.IgnoreNotFound(s.client.Patch(ctx, exec, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager)))
}

// install ends the install job as the items' configurations say, or waits
// for a delay or an interrupt.
func (s *Stub) install(ctx context.Context, exec *lsv1alpha1.Execution) (ctrl.Result, error) {
	items, err := configs(exec)
	if err != nil {
		return ctrl.Result{}, s.finish(ctx, exec, lsv1alpha1.PhaseFailed, failure(ReasonDeployItemsFailed, err.Error(), lsv1alpha1.ErrorConfigurationProblem), nil)
	}
	if cycle := cycleOf(exec.Spec.DeployItems); cycle != "" {
		return ctrl.Result{}, s.finish(ctx, exec, lsv1alpha1.PhaseFailed,
			failure(ReasonCyclicDependencies, "cyclic dependencies: "+cycle, lsv1alpha1.ErrorCyclicDependencies), nil)
	}
	if wait, forever := s.remaining(exec, items); forever || wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, s.progressing(ctx, exec)
	}
	var failed []string
	exports := map[string]any{}
	for _, it := range exec.Spec.DeployItems {
		cfg := items[it.Name]
		if lsv1alpha1.Phase(cfg.Phase) == lsv1alpha1.PhaseFailed {
			failed = append(failed, it.Name)
		}
		if cfg.Export != nil && len(cfg.Export.Raw) > 0 {
			var v any
			if err := json.Unmarshal(cfg.Export.Raw, &v); err != nil {
				return ctrl.Result{}, err
			}
			exports[it.Name] = v
		}
	}
	if len(failed) > 0 {
		sort.Strings(failed)
		msg := "deploy items failed: " + strings.Join(failed, ", ") + "; " + failed[0] + ": " + ReasonMockFailed +
			": the provider configuration asks for phase Failed"
		return ctrl.Result{}, s.finish(ctx, exec, lsv1alpha1.PhaseFailed, failure(ReasonDeployItemsFailed, msg, lsv1alpha1.ErrorConfigurationProblem), nil)
	}
	ref, err := s.writeExports(ctx, exec, exports)
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, s.finish(ctx, exec, lsv1alpha1.PhaseSucceeded, nil, ref)
}

func failure(reason, msg string, code lsv1alpha1.ErrorCode) *lsv1alpha1.Error {
	return &lsv1alpha1.Error{Operation: OperationReconcile, Reason: reason, Message: msg, Codes: []lsv1alpha1.ErrorCode{code}}
}

// remaining is how long the job still runs: the longest delay since the
// stub first saw the job; forever while an item stays Progressing.
func (s *Stub) remaining(exec *lsv1alpha1.Execution, items map[string]*mockv1alpha1.ProviderConfiguration) (time.Duration, bool) {
	var longest time.Duration
	for _, cfg := range items {
		if lsv1alpha1.Phase(cfg.Phase) == lsv1alpha1.PhaseProgressing {
			return 0, true
		}
		if cfg.Delay != nil {
			longest = max(longest, cfg.Delay.Duration)
		}
	}
	if longest == 0 {
		return 0, false
	}
	key := exec.Namespace + "/" + exec.Name + "/" + exec.Status.JobID
	s.mu.Lock()
	defer s.mu.Unlock()
	start, ok := s.started[key]
	if !ok {
		start = s.now()
		s.started[key] = start
	}
	left := longest - s.now().Sub(start)
	if left <= 0 {
		delete(s.started, key)
	}
	return left, false
}

// progressing shows the running job (phase Progressing, the generation it
// runs) once.
func (s *Stub) progressing(ctx context.Context, exec *lsv1alpha1.Execution) error {
	if exec.Status.Phase == lsv1alpha1.PhaseProgressing {
		return nil
	}
	return s.writeStatus(ctx, exec, map[string]any{
		"phase":              lsv1alpha1.PhaseProgressing,
		"observedGeneration": exec.Generation,
		"lastError":          nil,
	})
}

// finish ends the running job in phase with lastError le (nil: none) and
// the exports at ref (nil: none).
func (s *Stub) finish(ctx context.Context, exec *lsv1alpha1.Execution, phase lsv1alpha1.Phase, le *lsv1alpha1.Error, ref *lsv1alpha1.ObjectReference) error {
	gen := exec.Generation
	if exec.Status.Phase == lsv1alpha1.PhaseProgressing && exec.Status.ObservedGeneration > 0 {
		gen = exec.Status.ObservedGeneration
	}
	if le != nil {
		now := metav1.NewTime(s.now())
		le.LastTransitionTime, le.LastUpdateTime = now, now
	}
	fields := map[string]any{
		"phase":              phase,
		"jobIDFinished":      exec.Status.JobID,
		"observedGeneration": gen,
		"lastError":          le,
	}
	if phase != lsv1alpha1.PhaseDeleteFailed {
		fields["exportRef"] = ref
	}
	return s.writeStatus(ctx, exec, fields)
}

func (s *Stub) writeStatus(ctx context.Context, exec *lsv1alpha1.Execution, fields map[string]any) error {
	raw, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": exec.ResourceVersion},
		"status":   fields,
	})
	if err != nil {
		return err
	}
	err = s.client.Status().Patch(ctx, exec, client.RawPatch(types.MergePatchType, raw), client.FieldOwner(FieldManager))
	return client.IgnoreNotFound(err)
}

// writeExports writes the exports DataObject (none without exports).
func (s *Stub) writeExports(ctx context.Context, exec *lsv1alpha1.Execution, exports map[string]any) (*lsv1alpha1.ObjectReference, error) {
	if len(exports) == 0 {
		return nil, nil
	}
	raw, err := json.Marshal(exports)
	if err != nil {
		return nil, err
	}
	do := &lsv1alpha1.DataObject{}
	do.Name, do.Namespace = ExportsName(exec.Name), exec.Namespace
	_, err = controllerutil.CreateOrPatch(ctx, s.client, do, func() error {
		do.Data = lsv1alpha1.NewAnyJSON(raw)
		return controllerutil.SetControllerReference(exec, do, s.client.Scheme())
	})
	if err != nil {
		return nil, fmt.Errorf("writing exports DataObject %s: %w", do.Name, err)
	}
	return &lsv1alpha1.ObjectReference{Name: do.Name, Namespace: do.Namespace}, nil
}

// delete runs a deletion job: the execution goes, or ends DeleteFailed when
// an item's Target is gone and it may not be deleted without uninstalling.
func (s *Stub) delete(ctx context.Context, exec *lsv1alpha1.Execution) error {
	if exec.Annotations[lsv1alpha1.DeleteWithoutUninstallAnnotation] != "true" {
		var failed, causes []string
		for _, it := range exec.Spec.DeployItems {
			if it.Target == nil {
				continue
			}
			err := s.client.Get(ctx, client.ObjectKey{Namespace: exec.Namespace, Name: it.Target.Name}, &lsv1alpha1.Target{})
			switch {
			case apierrors.IsNotFound(err):
				failed = append(failed, it.Name)
				causes = append(causes, fmt.Sprintf("%s: %s: spec.target: Target %s/%s not found%s", it.Name, ReasonTargetNotFound, exec.Namespace, it.Target.Name, deleteFailedHint))
			case err != nil:
				return err
			}
		}
		if len(failed) > 0 {
			sort.Strings(failed)
			sort.Strings(causes)
			le := &lsv1alpha1.Error{Operation: OperationDelete, Reason: ReasonDeleteFailed,
				Message: "deleting deploy items failed: " + strings.Join(failed, ", ") + "; " + strings.Join(causes, "; "),
				Codes:   []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorConfigurationProblem}}
			return s.finish(ctx, exec, lsv1alpha1.PhaseDeleteFailed, le, nil)
		}
	}
	return s.remove(ctx, exec)
}

// deleteIfOwnerGone deletes an execution whose owning installation went
// without handing it a deletion job.
func (s *Stub) deleteIfOwnerGone(ctx context.Context, exec *lsv1alpha1.Execution) error {
	owner := metav1.GetControllerOf(exec)
	if owner == nil {
		return s.remove(ctx, exec)
	}
	inst := &lsv1alpha1.Installation{}
	err := s.client.Get(ctx, client.ObjectKey{Namespace: exec.Namespace, Name: owner.Name}, inst)
	switch {
	case apierrors.IsNotFound(err), err == nil && inst.UID != owner.UID:
		return s.remove(ctx, exec)
	}
	return err
}

// remove deletes the exports DataObject and removes the finalizer.
func (s *Stub) remove(ctx context.Context, exec *lsv1alpha1.Execution) error {
	do := &lsv1alpha1.DataObject{}
	do.Name, do.Namespace = ExportsName(exec.Name), exec.Namespace
	if err := s.client.Delete(ctx, do); client.IgnoreNotFound(err) != nil {
		return err
	}
	if !slices.Contains(exec.Finalizers, lsv1alpha1.Finalizer) {
		return nil
	}
	fins := slices.DeleteFunc(slices.Clone(exec.Finalizers), func(f string) bool { return f == lsv1alpha1.Finalizer })
	raw, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": fins, "resourceVersion": exec.ResourceVersion}})
	if err != nil {
		return err
	}
	return client.IgnoreNotFound(s.client.Patch(ctx, exec, client.RawPatch(types.MergePatchType, raw), client.FieldOwner(FieldManager)))
}

// configs decodes every item's mock provider configuration.
func configs(exec *lsv1alpha1.Execution) (map[string]*mockv1alpha1.ProviderConfiguration, error) {
	out := map[string]*mockv1alpha1.ProviderConfiguration{}
	for _, it := range exec.Spec.DeployItems {
		cfg := &mockv1alpha1.ProviderConfiguration{}
		if len(it.Config.Raw) > 0 {
			if err := json.Unmarshal(it.Config.Raw, cfg); err != nil {
				return nil, fmt.Errorf("deploy item %s: spec.config: %w", it.Name, err)
			}
		}
		out[it.Name] = cfg
	}
	return out, nil
}

// cycleOf returns a dependency cycle among the items ("a -> b -> a"), or "".
func cycleOf(items []lsv1alpha1.DeployItemTemplate) string {
	deps := map[string][]string{}
	var names []string
	for _, it := range items {
		deps[it.Name] = it.DependsOn
		names = append(names, it.Name)
	}
	sort.Strings(names)
	const (
		onPath = iota + 1
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(n string) string
	visit = func(n string) string {
		switch state[n] {
		case onPath:
			i := slices.Index(path, n)
			return strings.Join(append(slices.Clone(path[i:]), n), " -> ")
		case done:
			return ""
		}
		state[n] = onPath
		path = append(path, n)
		for _, d := range deps[n] {
			if _, ok := deps[d]; !ok {
				continue
			}
			if c := visit(d); c != "" {
				return c
			}
		}
		path = path[:len(path)-1]
		state[n] = done
		return ""
	}
	for _, n := range names {
		if c := visit(n); c != "" {
			return c
		}
	}
	return ""
}
