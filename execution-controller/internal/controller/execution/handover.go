package execution

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/controller/timeouts"
	"github.com/terrace-dev/terrace/execution-controller/internal/patch"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// ReconcileTimeFormat is the layout of the reconcile-time stamp: RFC 3339
// with milliseconds, so a deployer can measure its pickup latency (readers
// parsing time.RFC3339 accept the fraction).
const ReconcileTimeFormat = "2006-01-02T15:04:05.000Z07:00"

// handOver gives job to the item: first the reconcile-time annotation (so a
// deployer that picks the job up at once finds it to remove), then
// status.jobID. The annotation patch carries the resourceVersion of the copy
// the decision was made on (the cache, or the response of this reconcile's
// apply): if the item changed since — e.g. the job was handed over already
// and the deployer removed reconcile-time — the patch conflicts and nothing
// is written (re-stamping reconcile-time then would fire a false pickup
// timeout); the newer version's watch event brings the next reconcile.
//
// An item created by this reconcile with the stamp (stampedAtCreate) skips
// the annotation patch, unless a trace context has to go in.
func (r *Reconciler) handOver(ctx context.Context, di *lsv1alpha1.DeployItem, job string, stampedAtCreate bool) (bool, error) {
	if di.Status.JobID == job {
		return false, nil
	}
	key := client.ObjectKeyFromObject(di)
	if r.handedOver.Stale(key, di.ResourceVersion) {
		// The cache still shows the item from before this controller's own
		// hand-over: the job is handed already (a write now could only conflict).
		return false, nil
	}
	item := di.DeepCopy()
	// The deployer continues this job's trace: the span context goes into the
	// same write (only while tracing is on).
	set := tracing.AddToPatch(ctx, item.Annotations, map[string]*string{})
	if !stampedAtCreate || len(set) > 0 {
		stamp := r.Now().UTC().Format(ReconcileTimeFormat)
		set[lsv1alpha1.ReconcileTimeAnnotation] = &stamp
	}
	if operation(item) == lsv1alpha1.OperationAbort {
		// An abort request left over from the item's earlier job (its
		// removal is a second write, which can fail): it is about a job
		// that has ended, and must not abort this one (a deployer aborts
		// whatever job runs while it is there). It goes in the same write.
		set[lsv1alpha1.OperationAnnotation] = nil
		set[lsv1alpha1.AbortTimeAnnotation] = nil
	}
	if _, ok := item.Annotations[timeouts.AbortReasonAnnotation]; ok {
		// The reason of that left-over abort goes with it.
		set[timeouts.AbortReasonAnnotation] = nil
	}
	replaced := []string{item.ResourceVersion}
	if len(set) > 0 {
		if err := patch.Annotations(ctx, r.Client, r.FieldManager, item, item.ResourceVersion, set); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				logf.FromContext(ctx).V(1).Info("deploy item changed since it was read; hand-over waits for its event",
					"deployItem", item.Name, "error", err.Error())
				return false, nil
			}
			return false, err
		}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": lsv1alpha1.SchemeGroupVersion.String(),
		"kind":       "DeployItem",
		"metadata":   map[string]any{"name": item.Name, "namespace": item.Namespace},
		"status":     map[string]any{"jobID": job},
	}}
	if err := r.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(r.FieldManager), client.ForceOwnership); err != nil {
		return false, fmt.Errorf("handing job to deploy item %s: %w", item.Name, err)
	}
	if rv := u.GetResourceVersion(); rv != "" && rv != item.ResourceVersion {
		replaced = append(replaced, item.ResourceVersion)
		item.ResourceVersion = rv
	}
	r.handedOver.Replaced(key, replaced...)
	item.Status.JobID = job
	*di = *item
	return true, nil
}
