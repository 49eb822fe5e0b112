package installation

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// ReasonDeletedDuringJob fails the install job of an installation being
// deleted that runs Init (again, after a wait) or Completing, or reaches a
// write of its exports or context copies.
const ReasonDeletedDuringJob = "DeletedDuringJob"

// initWhileDeleting ends the job of an installation being deleted that
// (re)enters Init: it creates or updates no execution, sub-installation or
// context copy, before any request. A running install job is finished before
// the deletion job starts (seed 002), but what it would write now outlives
// the installation's decision to go, say an export deleted meanwhile (by
// hand, or by a foreground deletion) created again, which successors would
// read as current. Init and Completing are the only phases that write
// context copies and exports, and both end such a job at their start.
// follows is deletionFollows.
func initWhileDeleting(follows string) error {
	return jobEndsf(ReasonDeletedDuringJob, lsv1alpha1.ErrorForInfoOnly,
		"the installation is being deleted: its execution, sub-installations and context copies are not written; the job ends in phase Init%s", follows)
}

// completingWhileDeleting ends the job of an installation being deleted
// that reached Completing: its exports are not written (see
// initWhileDeleting), and the message names them. follows is
// deletionFollows.
func completingWhileDeleting(inst *lsv1alpha1.Installation, follows string) error {
	var what []string
	for _, d := range inst.Spec.Exports.Data {
		what = append(what, dataExportWhat(d))
	}
	for _, t := range inst.Spec.Exports.Targets {
		what = append(what, targetExportWhat(t))
	}
	msg := "the installation is being deleted: "
	switch len(what) {
	case 0:
		msg += "the job ends in phase Completing"
	case 1:
		msg += what[0] + " is not written; the job ends here"
	default:
		msg += strings.Join(what[:len(what)-1], ", ") + " and " + what[len(what)-1] + " are not written; the job ends here"
	}
	return jobEndsf(ReasonDeletedDuringJob, lsv1alpha1.ErrorForInfoOnly, "%s%s", msg, follows)
}

// maxParentWalk bounds how far deletionFollows walks up the tree for the
// root's name (deeper than any tree the nesting limit lets a blueprint
// build; beyond it the root goes unnamed).
const maxParentWalk = 64

// deletionFollows ends a DeletedDuringJob message with who runs the
// deletion. A root, or a sub-installation whose parent is gone or being
// deleted, runs (or is handed) its deletion job when this job ended. A
// sub-installation deleted by hand under a parent that stays does not: its
// deletion runs in its parent's next job, which creates it again while the
// blueprint renders it, and for a root parent only the reconcile annotation
// starts that job. Saying "the deletion job follows" there left the user
// waiting on a `kubectl delete` that hangs. The parents are read from the
// cache (no request); one that cannot be read leaves the root unnamed.
func (r *Reconciler) deletionFollows(ctx context.Context, inst *lsv1alpha1.Installation) string {
	const follows = " and the deletion job follows"
	parent := parentName(inst)
	if parent == "" {
		return follows
	}
	root := ""
	cur := inst
	for range maxParentWalk {
		name := parentName(cur)
		if name == "" {
			root = cur.Name
			break
		}
		p := &lsv1alpha1.Installation{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: inst.Namespace, Name: name}, p)
		if cur == inst && (apierrors.IsNotFound(err) ||
			(err == nil && (p.UID != metav1.GetControllerOf(inst).UID || p.DeletionTimestamp != nil))) {
			// Its parent is gone (or is another object of that name), and
			// its own deletion job runs; or the parent's deletion job hands
			// this one its deletion.
			return follows
		}
		if err != nil {
			break
		}
		cur = p
	}
	annotate := fmt.Sprintf("add the %s=%s annotation to the root installation", lsv1alpha1.OperationAnnotation, lsv1alpha1.OperationReconcile)
	if root != "" {
		annotate += " " + root
	}
	return fmt.Sprintf("; no deletion job follows on its own: its deletion runs in the next job of its parent %s "+
		"(which creates it again while the blueprint renders it): %s", parent, annotate)
}
