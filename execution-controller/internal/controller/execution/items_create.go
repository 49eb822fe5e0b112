package execution

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/owner"
	"github.com/terrace-dev/terrace/execution-controller/internal/patch"
	"github.com/terrace-dev/terrace/kit/flow"
)

// syncItems creates or updates the DeployItem of every spec entry of the
// job's item set (status.deployItemRefs). With createOnly, existing items
// are left alone (spec changes are applied at the start of the next job, not
// in the middle of one). An entry added to the spec mid-job is not the job's:
// it is created by the next job. An item of the job whose entry left the
// spec is neither updated nor (if missing) created.
//
// A write the API server refuses for good (a namesake the execution does not
// control, a template it rejects) is returned as a stalled flow.Error (reason and ERR_CONFIGURATION_PROBLEM): the job
// fails with it instead of retrying for ever. A name held by a namesake on its
// way out is returned as a namesakeWait: the job waits (see waitForName).
func (r *Reconciler) syncItems(ctx context.Context, s *scope, createOnly bool) error {
	log := logf.FromContext(ctx)
	orphansLeft := len(orphansOf(s)) > 0
	inJob := jobItems(s.exec)
	for i := range s.exec.Spec.DeployItems {
		t := &s.exec.Spec.DeployItems[i]
		if !inJob[t.Name] {
			log.V(1).Info("deploy item added to the spec mid-job waits for the next job", "item", t.Name)
			continue
		}
		cur := s.items[t.Name]
		if cur == nil {
			// A new item without dependencies, created when a job starts and
			// no orphan's deletion holds the job up, is handed the job in this
			// very reconcile: its create carries the reconcile-time stamp, so
			// the hand-over needs no annotation patch of its own (handOver).
			// (A stamp on an item that then waits would start its pickup
			// timeout before it has a job.)
			stamp := !createOnly && len(t.DependsOn) == 0 && !orphansLeft
			created, err := r.createItem(ctx, s, t, stamp)
			if err != nil {
				return r.unstampOnProblem(ctx, s, err)
			}
			if created {
				continue
			}
			// It existed after all and is this execution's (the cache lags):
			// carry on as for an existing item.
			cur = s.items[t.Name]
		}
		if createOnly {
			continue
		}
		// An item whose fields match may still carry a label an earlier
		// template had and this one dropped: it goes with the update, but
		// only when this controller owns it (a user's or another manager's
		// label stays, and costs no write). Which it is only a live read
		// tells: a rare path (labels no template sets are rare), taken once
		// per item and set of such labels (see foreignLabels).
		onlyLabels := upToDate(s.exec, t, cur)
		var extra []string
		if onlyLabels {
			if extra = extraLabels(s.exec, t, cur); len(extra) == 0 {
				continue
			}
		}
		if err := r.updateItem(ctx, s, t, cur, extra); err != nil {
			return r.unstampOnProblem(ctx, s, err)
		}
	}
	nameFree(s, ReasonDeployItemNameTaken)
	return nil
}

// unstampOnProblem removes the reconcile-time stamp from the items this
// reconcile created stamped when the job fails with a stalled error, or waits
// for a namesake to go (namesakeWait), before they were handed the job: they will
// not get it (or not now: the hand-over stamps them again), and a stamp left
// behind would fail them with a false PickupTimeout later. Other errors are
// returned as they are (the reconcile is retried and hands the job over).
func (r *Reconciler) unstampOnProblem(ctx context.Context, s *scope, err error) error {
	if !flow.IsStalled(err) && !flow.IsWaiting(err) {
		return err
	}
	for _, n := range s.stamped {
		di := s.items[n]
		if di == nil {
			continue
		}
		if uerr := patch.Annotations(ctx, r.Client, r.FieldManager, di, "",
			map[string]*string{lsv1alpha1.ReconcileTimeAnnotation: nil}); client.IgnoreNotFound(uerr) != nil {
			return uerr
		}
	}
	s.stamped = nil
	return err
}

// createItem creates the item of template t, which the execution's cache
// shows no item of its own for. It is a create, not an apply: a namesake
// (another execution's item "<exec>-<item>" that maps to the same name, or a
// user's own DeployItem) must never be taken over. With stamp, the create
// carries the reconcile-time stamp (see syncItems). It reports false when
// the item existed and is this execution's after all (a lagging cache; the
// live copy is in s.items then, and is left as it is).
func (r *Reconciler) createItem(ctx context.Context, s *scope, t *lsv1alpha1.DeployItemTemplate, stamp bool) (bool, error) {
	log := logf.FromContext(ctx)
	u, err := desiredItem(s.exec, t)
	if err != nil {
		return false, err
	}
	if stamp {
		_ = unstructured.SetNestedField(u.Object, r.Now().UTC().Format(ReconcileTimeFormat),
			"metadata", "annotations", lsv1alpha1.ReconcileTimeAnnotation)
	}
	name := u.GetName()
	err = r.Client.Create(ctx, u, client.FieldOwner(r.FieldManager))
	switch {
	case err == nil:
	case apierrors.IsAlreadyExists(err):
		return false, r.existingItem(ctx, s, t, name)
	case apierrors.IsInvalid(err):
		return false, flow.StalledError(ReasonDeployItemInvalid, fmt.Errorf(
			"deploy item %s (item %s) refused by the API server: %w", name, t.Name, err))
	default:
		return false, fmt.Errorf("creating deploy item %s: %w", t.Name, err)
	}
	created := &lsv1alpha1.DeployItem{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, created); err != nil {
		return false, fmt.Errorf("reading created deploy item %s: %w", t.Name, err)
	}
	// The create's response is the whole object as the server has it now
	// (resourceVersion included): the hand-over that may follow in this
	// reconcile is guarded by that resourceVersion.
	log.Info("created deploy item", "item", t.Name, "deployItem", created.Name)
	s.items[t.Name] = created
	if stamp {
		s.stamped = append(s.stamped, t.Name)
	}
	return true, nil
}

// existingItem handles a create that found the item's name taken: by an
// earlier execution's item on its way out (the job waits, see namesakeWait),
// by one whose deletion failed or by someone else's (the job fails), or by
// this execution's own item that the cache did not show under its item name
// (it goes into s.items as read, and nil is returned).
func (r *Reconciler) existingItem(ctx context.Context, s *scope, t *lsv1alpha1.DeployItemTemplate, name string) error {
	live := &lsv1alpha1.DeployItem{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.exec.Namespace, Name: name}, live); err != nil {
		return fmt.Errorf("reading existing deploy item %s: %w", name, err)
	}
	ref := metav1.GetControllerOf(live)
	earlier := owner.Execution(live) // an Execution's, of any version (nil: not an Execution's)
	if ref != nil && ref.UID != s.exec.UID && (live.DeletionTimestamp != nil || (earlier != nil && earlier.Name == s.exec.Name)) {
		// The item of an earlier execution of this name (deleted, by
		// hand or with its installation, and created again), or one on
		// its way out: its deletion frees the name - unless it failed.
		if deleteStateOf(live) == deleteFailed {
			// It keeps the name until someone fixes or removes it; no
			// retry here can: the job fails and says so.
			return flow.StalledError(ReasonDeployItemNameConflict, fmt.Errorf(
				"deploy item %s/%s (item %s of execution %s) cannot be created: the DeployItem of that name "+
					"belongs to %s and its deletion failed, so it keeps the name; fix its deletion (say with "+
					"delete-without-uninstall and operation: reconcile on it) or remove it, then start a new job%s",
				s.exec.Namespace, name, t.Name, s.exec.Name, controllerName(live),
				firstCause(map[string]*lsv1alpha1.DeployItem{name: live}, []string{name})))
		}
		// The job waits (no error: see namesakeWait). The namesake's
		// changes wake this execution: through its controller's watch
		// when that is an earlier execution of this name, otherwise
		// through namesakeWaiters. Said in the job's Progressing
		// condition, so the wait is not silent.
		return deployItemNameTaken(fmt.Sprintf("deploy item %s/%s (item %s) is taken by a DeployItem of %s "+
			"that is being deleted, or will be with its owner; waiting for it to go", s.exec.Namespace, name, t.Name,
			controllerName(live)))
	}
	if ref == nil || ref.UID != s.exec.UID {
		return flow.StalledError(ReasonDeployItemNameConflict, fmt.Errorf(
			"deploy item %s/%s (item %s of execution %s) exists and is controlled by %s; it is left alone: "+
				"rename the item or the execution, or delete that DeployItem", s.exec.Namespace, name, t.Name,
			s.exec.Name, controllerName(live)))
	}
	logf.FromContext(ctx).V(1).Info("deploy item exists already; not created again", "item", t.Name, "deployItem", name)
	for n, di := range s.items {
		if di.Name == name {
			// The cache showed it under another item name (its item-name
			// label was removed by hand): it is this item, not an orphan.
			delete(s.items, n)
		}
	}
	s.items[t.Name] = live
	return nil
}
