package installation

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// mergePatch is a JSON merge patch of exactly the given document: it never
// carries fields the caller did not name.
type mergePatch map[string]any

func (p mergePatch) Type() types.PatchType              { return types.MergePatchType }
func (p mergePatch) Data(client.Object) ([]byte, error) { return json.Marshal(map[string]any(p)) }

// patchAnnotations sets (non-nil) or removes (nil) annotations, writing
// nothing when nothing would change.
func patchAnnotations(ctx context.Context, c client.Client, obj client.Object, set map[string]*string) error {
	ann := map[string]any{}
	for k, v := range set {
		cur, ok := obj.GetAnnotations()[k]
		switch {
		case v == nil && ok:
			ann[k] = nil
		case v != nil && (!ok || cur != *v):
			ann[k] = *v
		}
	}
	if len(ann) == 0 {
		return nil
	}
	if err := c.Patch(ctx, obj, mergePatch{"metadata": map[string]any{"annotations": ann}}, client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("patching annotations of %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
	}
	return nil
}

// patchMeta removes and adds finalizers with a resourceVersion precondition,
// because finalizers are a list a merge patch would replace as a whole.
func patchMeta(ctx context.Context, c client.Client, obj client.Object, remove, add []string) error {
	fins := slices.DeleteFunc(slices.Clone(obj.GetFinalizers()), func(f string) bool { return slices.Contains(remove, f) })
	for _, f := range add {
		if !slices.Contains(fins, f) {
			fins = append(fins, f)
		}
	}
	if slices.Equal(fins, obj.GetFinalizers()) {
		return nil
	}
	p := mergePatch{"metadata": map[string]any{"finalizers": fins, "resourceVersion": obj.GetResourceVersion()}}
	if err := c.Patch(ctx, obj, p, client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("patching finalizers of %s: %w", obj.GetName(), err)
	}
	return nil
}

// subObjects lists the installation's sub-installations and its execution
// from the cache (owner references decide).
func (r *Reconciler) subObjects(ctx context.Context, inst *lsv1alpha1.Installation) ([]*lsv1alpha1.Installation, *lsv1alpha1.Execution, error) {
	list := &lsv1alpha1.InstallationList{}
	// The parent index, not a label selector: a selector scans every
	// installation of the namespace on every reconcile.
	if err := r.Client.List(ctx, list, client.InNamespace(inst.Namespace), client.MatchingFields{ParentIndex: inst.Name}); err != nil {
		return nil, nil, fmt.Errorf("listing sub-installations: %w", err)
	}
	var subs []*lsv1alpha1.Installation
	for i := range list.Items {
		if isOwnedBy(&list.Items[i], inst) {
			subs = append(subs, &list.Items[i])
		}
	}
	exec := &lsv1alpha1.Execution{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: inst.Namespace, Name: executionName(inst)}, exec); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("reading execution: %w", err)
		}
		exec = nil
	} else if !isOwnedBy(exec, inst) {
		exec = nil
	}
	return subs, exec, nil
}

// subObjectsOf is subObjects with what this reconcile wrote itself in place
// of the cache's (possibly older) copies: a phase running right after the
// one that created or handed over a sub-object sees it as written.
func (r *Reconciler) subObjectsOf(ctx context.Context, s *scope) ([]*lsv1alpha1.Installation, *lsv1alpha1.Execution, error) {
	subs, exec, err := r.subObjects(ctx, s.inst)
	if err != nil || len(s.fresh) == 0 {
		return subs, exec, err
	}
	if e, ok := s.fresh["Execution/"+executionName(s.inst)].(*lsv1alpha1.Execution); ok {
		exec = e
	}
	seen := map[string]bool{}
	for i, sub := range subs {
		if f, ok := s.fresh["Installation/"+sub.Name].(*lsv1alpha1.Installation); ok {
			subs[i] = f
		}
		seen[sub.Name] = true
	}
	var added []*lsv1alpha1.Installation
	for k, o := range s.fresh {
		if f, ok := o.(*lsv1alpha1.Installation); ok && k == "Installation/"+f.Name && !seen[f.Name] {
			added = append(added, f)
		}
	}
	sort.Slice(added, func(i, j int) bool { return added[i].Name < added[j].Name })
	return append(subs, added...), exec, nil
}

func isOwnedBy(obj client.Object, owner *lsv1alpha1.Installation) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == owner.UID && ref.Controller != nil && *ref.Controller {
			return true
		}
	}
	return false
}

// executionName is the installation's execution: same name, other kind.
func executionName(inst *lsv1alpha1.Installation) string { return inst.Name }

// handOverExecution writes the execution's status.jobID with server-side
// apply and this controller's field manager: the execution controller owns
// every other status field, which this write can therefore never touch.
// While tracing is on, the span context goes into the execution's
// trace-context annotation first (a metadata patch: a status write cannot
// carry it), so the execution starts the job in this trace.
func (r *Reconciler) handOverExecution(ctx context.Context, s *scope, exec *lsv1alpha1.Execution, job string) error {
	if exec.Status.JobID == job {
		return nil
	}
	// The execution continues this job's trace (only while tracing is on).
	if err := handOverTraceContext(ctx, r.Client, exec); err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": lsv1alpha1.SchemeGroupVersion.String(),
		"kind":       "Execution",
		"metadata":   map[string]any{"name": exec.Name, "namespace": exec.Namespace},
		"status":     map[string]any{"jobID": job},
	}}
	if err := r.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("handing job to execution %s: %w", exec.Name, err)
	}
	exec = exec.DeepCopy()
	exec.Status.JobID = job
	s.remember(exec)
	return nil
}

// handOverInstallation writes a sub-installation's status.jobID; a merge
// patch of that one field, so the sub-installation's own status stays as is.
//
// A sub-installation that started another job is not handed this one: it
// would go on in its running phase under the new job ID and wait for its
// own sub-objects to finish a job they never get (seed 002: a job starts
// after the last one finished). The phase handing over waits (a *waiting
// error) until it finished that job; its status change wakes the parent.
// A job it has not started yet (its phase is still the last job's) is
// replaced: it starts whichever it finds.
func (r *Reconciler) handOverInstallation(ctx context.Context, s *scope, sub *lsv1alpha1.Installation, job string) error {
	st := sub.Status
	if st.JobID == job {
		return nil
	}
	if jobState(sub).Started() {
		return waitf("sub-installation %s to finish job %s, which it is running (phase %s), before it is handed this one",
			sub.Name, st.JobID, st.Phase)
	}
	// The sub-installation continues this job's trace (only while tracing is on).
	if err := handOverTraceContext(ctx, r.Client, sub); err != nil {
		return err
	}
	if err := r.Client.Status().Patch(ctx, sub, mergePatch{"status": map[string]any{"jobID": job}}, client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("handing job to sub-installation %s: %w", sub.Name, err)
	}
	s.remember(sub)
	return nil
}

// finishedWith reports whether a sub-object finished the given job.
func finishedWith(jobIDFinished, job string) bool { return jobIDFinished == job }
