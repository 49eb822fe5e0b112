package lib

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// installed is the part of the status that records what the deployer did
// outside the item: status.providerStatus (what it installed on the target,
// e.g. the manifest deployer's managedResources) and status.exportRef (the
// export Secret the item owns). These are the fields a Deployer sets (see
// Deployer); the library reads them to uninstall (nothingToUninstall,
// Delete) and to clean up the export.
type installed struct {
	providerStatus *runtime.RawExtension
	exportRef      *lsv1alpha1.ObjectReference
}

func recordOf(di *lsv1alpha1.DeployItem) installed {
	return installed{providerStatus: di.Status.ProviderStatus.DeepCopy(), exportRef: di.Status.ExportReference.DeepCopy()}
}

// recordAttempts bounds keepRecord's writes when they conflict again.
const recordAttempts = 3

// keepRecord saves the installed-state record of a status write that
// conflicted. The status write is guarded by the resourceVersion the
// reconcile read, so it is lost whenever the item changed meanwhile — e.g.
// the execution controller interrupted or timed out the job (phase Failed,
// jobIDFinished) while the deployer applied. Dropping the job's outcome is
// right (the next reconcile decides it from the current item), but the
// deployer's side effects on the target already happened: if their record
// were dropped too, a reconcile of an item that is not in a job any more (or an
// abort, or the deletion) would never record them, and deleting the item
// would leave them on the target. The next reconcile is not relied upon: the
// record is written now.
//
// It re-reads the item from the API server and writes only providerStatus and
// exportRef, guarded by the fresh resourceVersion; phase, jobIDFinished,
// lastError and the conditions stay what the other writer set. A field is
// written only where this reconcile changed it and the current item still
// holds the value the reconcile read (compare-and-swap per field: a value
// somebody else wrote meanwhile is not overwritten). It runs only after a
// conflict, so the normal path makes no extra request. It returns the
// resourceVersion its write replaced ("" when it wrote nothing); failures are
// logged, and the caller requeues as for any conflict.
func (r *Reconciler) keepRecord(ctx context.Context, s *scope, want installed) string {
	read := recordOf(s.orig)
	psChanged := !equality.Semantic.DeepEqual(want.providerStatus, read.providerStatus)
	exChanged := !equality.Semantic.DeepEqual(want.exportRef, read.exportRef)
	if !psChanged && !exChanged {
		return "" // the write recorded nothing new about the target
	}
	key := client.ObjectKeyFromObject(s.orig)
	log := s.log.WithValues("jobID", s.item.Status.JobID)
	for range recordAttempts {
		cur := &lsv1alpha1.DeployItem{}
		if err := r.reader.Get(ctx, key, cur); err != nil {
			if !apierrors.IsNotFound(err) {
				log.Error(err, "re-reading deploy item to keep the record of what is installed")
			}
			return ""
		}
		if cur.UID != s.orig.UID {
			return "" // another item of the same name: not what was applied for
		}
		obj, write, foreign := swapRecord(cur, read, want, psChanged, exChanged)
		if len(foreign) > 0 {
			log.Error(nil, "record of what is installed changed by another writer while reconciling; not overwriting it",
				"fields", foreign, "resourceVersion", cur.ResourceVersion)
		}
		if len(write) == 0 {
			return ""
		}
		p := client.MergeFromWithOptions(cur, client.MergeFromWithOptimisticLock{})
		err := r.client.Status().Patch(ctx, obj, p, client.FieldOwner(r.opts.Name))
		if err == nil {
			log.Info("status write conflicted; kept the record of what is installed",
				"fields", write, "phase", cur.Status.Phase, "jobIDFinished", cur.Status.JobIDFinished)
			if obj.ResourceVersion == cur.ResourceVersion {
				return ""
			}
			return cur.ResourceVersion
		}
		if !apierrors.IsConflict(err) {
			log.Error(err, "writing the record of what is installed after a conflict", "fields", write)
			return ""
		}
	}
	log.Error(nil, "record of what is installed not kept: the deploy item kept changing", "attempts", recordAttempts)
	return ""
}

// swapRecord is cur with the record fields set to want where this reconcile
// changed them (psChanged, exChanged) and cur still holds the value read
// (compare-and-swap per field). write names the fields to write; foreign
// those another writer changed meanwhile, which stay.
func swapRecord(cur *lsv1alpha1.DeployItem, read, want installed, psChanged, exChanged bool) (obj *lsv1alpha1.DeployItem, write, foreign []string) {
	obj = cur.DeepCopy()
	if psChanged {
		switch {
		case equality.Semantic.DeepEqual(cur.Status.ProviderStatus, want.providerStatus):
		case equality.Semantic.DeepEqual(cur.Status.ProviderStatus, read.providerStatus):
			obj.Status.ProviderStatus = want.providerStatus.DeepCopy()
			write = append(write, "providerStatus")
		default:
			foreign = append(foreign, "providerStatus")
		}
	}
	if exChanged {
		switch {
		case equality.Semantic.DeepEqual(cur.Status.ExportReference, want.exportRef):
		case equality.Semantic.DeepEqual(cur.Status.ExportReference, read.exportRef):
			obj.Status.ExportReference = want.exportRef.DeepCopy()
			write = append(write, "exportRef")
		default:
			foreign = append(foreign, "exportRef")
		}
	}
	return obj, write, foreign
}
