package execution

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/owner"
)

// OwnerIndex is the field index of deploy items by the name of the
// Execution that controls them, so an execution lists its items from the
// cache without a label scan.
const OwnerIndex = "terrace.dev/execution"

// ItemNameIndex is the field index of executions by the object names of the
// deploy items their spec maps to ("<exec>-<item>", see ItemObjectName), so
// the events of a deploy item that holds such a name for someone else (a
// namesake the execution waits for, see namesakeWait) reach that execution
// from the cache, without an API request.
const ItemNameIndex = "terrace.dev/deploy-item-name"

// ExportsNameIndex is the field index of executions by the name of their
// exports DataObject (see ExportsObjectName; a shortened name cannot be
// mapped back), so the events of a DataObject of that name held by someone
// else (one being deleted the execution waits for, see namesakeWait) reach
// that execution from the cache, without an API request.
const ExportsNameIndex = "terrace.dev/exports-name"

func indexExportsName(o client.Object) []string {
	exec, ok := o.(*lsv1alpha1.Execution)
	if !ok {
		return nil
	}
	return []string{ExportsObjectName(exec.Name)}
}

func indexItemNames(o client.Object) []string {
	exec, ok := o.(*lsv1alpha1.Execution)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(exec.Spec.DeployItems))
	for _, t := range exec.Spec.DeployItems {
		out = append(out, ItemObjectName(exec.Name, t.Name))
	}
	return out
}

// indexOwner indexes a deploy item by the name of the Execution controlling
// it (owner.Execution: the rule the timeouts reconciler uses, too).
func indexOwner(o client.Object) []string {
	ref := owner.Execution(o)
	if ref == nil {
		return nil
	}
	return []string{ref.Name}
}

// namesakeWaiters maps an object (a deploy item, or a DataObject) to the
// executions that write an object of its name, other than its controller (Owns
// maps an item to it; an execution's own exports DataObject changes by its own
// writes, which need not wake it): found through index, ItemNameIndex
// (the items their spec maps to) or ExportsNameIndex (their exports). One of
// them may wait for it to go (DeployItemNameTaken, DataObjectNameTaken), and
// its deletion, or an item's failed deletion, must wake that execution. The
// owner reference reaches only the object's own controller (say execution
// "app-db" for "app-db-main", where "app" waits for its item "db-main"; an
// installation for a DataObject it exports), or nothing when the controller
// is no Execution. Read from the cache's index: an event of an object that
// holds no one else's name maps to nothing, and costs no request.
func (r *Reconciler) namesakeWaiters(index string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		list := &lsv1alpha1.ExecutionList{}
		// Only names and UIDs are read: no copy of the cached objects needed.
		if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace()),
			client.MatchingFields{index: o.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
			logf.FromContext(ctx).Error(err, "listing executions by the name of an object they write",
				"index", index, "name", o.GetName())
			return nil
		}
		ref := metav1.GetControllerOf(o)
		var out []reconcile.Request
		for i := range list.Items {
			e := &list.Items[i]
			if ref != nil && ref.UID == e.UID {
				continue
			}
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e)})
		}
		return out
	}
}
