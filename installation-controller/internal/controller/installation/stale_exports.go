package installation

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// WriterIndex holds, on DataObjects and Targets, the name of the
// installation controlling them: the one that wrote them as an export or as
// a context copy of its imports. It finds what an installation wrote without
// a request and without scanning the namespace.
const WriterIndex = "terrace.dev/writer"

// ReasonStaleObjectDeleted: an Event on the installation when it deletes an
// export or context copy it wrote under a name its spec no longer has.
const ReasonStaleObjectDeleted = "StaleObjectDeleted"

func indexWriter(o client.Object) []string {
	if ref := metav1.GetControllerOf(o); ref != nil && isInstallationRef(*ref, ref.Name) {
		return []string{ref.Name}
	}
	return nil
}

// written says which of an installation's written objects a clean-up looks
// at: its context copies (in its own context) or its exports (in its
// parent's context, or unscoped for a root).
type written int

const (
	// writtenContextCopies are the context copies of its data and target
	// imports (when a job completes).
	writtenContextCopies written = iota
	// writtenDataCopies are the context copies of its data imports only
	// (in Init). A Target copy lasts until the job completes: the deploy
	// items its sub-installations deployed in the last job name it, and
	// need it to uninstall, whether the sub-installation goes (an orphan,
	// or deleted by hand, uninstalling in CleanupOrphaned) or stays
	// re-templated without that import (uninstalling in its own job). Init
	// cannot tell which copies those items name from the sub-installations'
	// specs: a repeated Init (a retry) already sees them re-templated.
	writtenDataCopies
	// writtenExports are its exported DataObjects (exported Targets are
	// kept, see deleteStale).
	writtenExports
)

// staleKind is a kind of object deleteStale looks at.
type staleKind struct {
	list func() client.ObjectList
	key  func(string) string
	name string
}

var (
	staleDataObjects = staleKind{func() client.ObjectList { return &lsv1alpha1.DataObjectList{} }, dataKey, "DataObject"}
	staleTargets     = staleKind{func() client.ObjectList { return &lsv1alpha1.TargetList{} }, targetKey, "Target"}
)

// deleteStale deletes the objects of `which` that inst wrote (it is their
// controller, by UID, and they carry KeyAnnotation) and that are not in keep
// (index keys, "data/<object>" and "target/<object>"). A spec that renames
// or drops an export or an import would otherwise leave the object of the
// old name in place for ever (until inst is deleted), and whoever imports it
// would read a value nobody maintains as if it were current; now they find
// it missing (ImportNotFound), which says what happened. Stale exports go
// when a job completes; stale context copies of data imports in Init, once
// the sub-installations that read them are re-templated or deleted and
// before any of them gets the job (a value that moved from the parent's
// imports to a child's exports is then free for the child); stale Target
// copies when the job completes (writtenDataCopies says why).
//
// Exported Targets are kept: a deploy item of an importer (another root, a
// sibling) names the Target itself and needs it to uninstall what it
// deployed, so deleting it would make that item's deletion fail. Context
// copies of target imports are named only by the deploy items of inst's own
// sub-installations, which have uninstalled those of the last job once this
// job completes.
//
// It reads the cache only: a job that renamed nothing sends no request.
// Every delete is preconditioned on the UID and resourceVersion read, so an
// object written again meanwhile is not lost.
func (r *Reconciler) deleteStale(ctx context.Context, inst *lsv1alpha1.Installation, which written, keep sets.Set[string]) error {
	kinds := []staleKind{staleDataObjects}
	if which == writtenContextCopies {
		kinds = append(kinds, staleTargets)
	}
	copies := which != writtenExports
	var deleted []string
	for _, kind := range kinds {
		list := kind.list()
		if err := r.Client.List(ctx, list, client.InNamespace(inst.Namespace), client.MatchingFields{WriterIndex: inst.Name}); err != nil {
			return fmt.Errorf("listing the %ss installation %s wrote: %w", kind.name, inst.Name, err)
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			return err
		}
		for _, item := range items {
			obj := item.(client.Object)
			if !isOwnedBy(obj, inst) || obj.GetDeletionTimestamp() != nil || obj.GetAnnotations()[KeyAnnotation] == "" ||
				keep.Has(kind.key(obj.GetName())) || (obj.GetLabels()[ContextLabel] == labelValue(inst.Name)) != copies {
				continue
			}
			uid, rv := obj.GetUID(), obj.GetResourceVersion()
			err := r.Client.Delete(ctx, obj, client.Preconditions{UID: &uid, ResourceVersion: &rv})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting %s %s, which installation %s no longer writes: %w", kind.name, obj.GetName(), inst.Name, err)
			}
			deleted = append(deleted, kind.name+" "+obj.GetName())
		}
	}
	if len(deleted) > 0 {
		sort.Strings(deleted)
		what := "export"
		if copies {
			what = "context copy of an import"
		}
		ctrl.LoggerFrom(ctx).Info("deleted objects the spec no longer names", "kind", what, "objects", deleted)
		r.Recorder.Eventf(inst, nil, "Normal", ReasonStaleObjectDeleted, "Cleanup",
			"deleted %v: each was this installation's %s under a name its spec no longer has", deleted, what)
	}
	return nil
}

// contextCopyKeys are the index keys of the context copies writeContextImports
// writes for im.
func contextCopyKeys(inst *lsv1alpha1.Installation, im *imports) sets.Set[string] {
	keep := sets.New[string]()
	for name := range im.values {
		if !im.isTarget(name) {
			keep.Insert(dataKey(ScopedName(inst.Name, name)))
		}
	}
	for name := range im.targets {
		keep.Insert(targetKey(ScopedName(inst.Name, name)))
	}
	return keep
}
