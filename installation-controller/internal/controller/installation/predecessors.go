package installation

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
)

// checkPredecessors returns a wait message while a predecessor (a sibling
// exporting something this installation imports) has not finished the job,
// and a stalled error when one finished without success.
func (r *Reconciler) checkPredecessors(ctx context.Context, inst *lsv1alpha1.Installation) (string, error) {
	preds, err := r.listByIndex(ctx, inst.Namespace, ExportsIndex, importKeys(inst), inst.Name)
	if err != nil {
		return "", err
	}
	root := isRoot(inst)
	var waiting []string
	for _, p := range preds {
		if parentName(p) != parentName(inst) {
			continue
		}
		finished := finishedWith(p.Status.JobIDFinished, inst.Status.JobID)
		if root {
			// Root installations run their own jobs: a predecessor must not
			// be in the middle of one.
			finished = p.Status.JobID == p.Status.JobIDFinished && p.Status.JobID != ""
		}
		if !finished {
			waiting = append(waiting, p.Name)
			continue
		}
		if p.Status.Phase != lsv1alpha1.PhaseSucceeded {
			return "", flow.Stalledf(ReasonPredecessorFailed, "predecessor %s (which exports an import of this installation) ended %s", p.Name, p.Status.Phase)
		}
	}
	if len(waiting) > 0 {
		return "predecessors " + strings.Join(waiting, ", ") + " to finish", nil
	}
	return "", nil
}

func (r *Reconciler) listByIndex(ctx context.Context, ns, index string, keys []string, except string) ([]*lsv1alpha1.Installation, error) {
	seen := map[string]bool{}
	var out []*lsv1alpha1.Installation
	for _, k := range keys {
		list := &lsv1alpha1.InstallationList{}
		if err := r.Client.List(ctx, list, client.InNamespace(ns), client.MatchingFields{index: k}); err != nil {
			return nil, fmt.Errorf("listing installations by %s: %w", index, err)
		}
		for i := range list.Items {
			it := &list.Items[i]
			if it.Name != except && !seen[it.Name] {
				seen[it.Name] = true
				out = append(out, it)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// triggerSuccessors starts the successors: root successors get the reconcile
// annotation; sub-installations are woken by the watch that maps this
// installation's status change to the installations importing its exports.
func (r *Reconciler) triggerSuccessors(ctx context.Context, inst *lsv1alpha1.Installation) error {
	if !isRoot(inst) {
		return nil
	}
	succs, err := r.listByIndex(ctx, inst.Namespace, ImportsIndex, exportKeys(inst), inst.Name)
	if err != nil {
		return err
	}
	op := string(lsv1alpha1.OperationReconcile)
	for _, s := range succs {
		if !isRoot(s) || s.DeletionTimestamp != nil {
			continue
		}
		if err := patchAnnotations(ctx, r.Client, s, map[string]*string{lsv1alpha1.OperationAnnotation: &op}); err != nil {
			return err
		}
		r.Recorder.Eventf(s, inst, "Normal", ReasonSuccessorTriggered, "Reconcile", "triggered by predecessor %s", inst.Name)
	}
	return nil
}
