package manifest

import (
	"context"
	"slices"

	"go.opentelemetry.io/otel/attribute"

	manifestv1alpha2 "github.com/terrace-dev/terrace/apis/deployers/manifest/v1alpha2"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// NothingToUninstall (lib.UninstallChecker): the item records no object the
// deployer would delete — none at all (a failed first apply records an empty
// list, which the library's default, an empty providerStatus, would take for
// something installed), or only objects of policies that are never deleted
// (keep, immutable). Another item's or somebody else's object under fallback
// is not recorded. Then an item whose Target is gone can still be deleted;
// Delete itself needs no Target for such an item either.
func (d *deployer) NothingToUninstall(di *lsv1alpha1.DeployItem) bool {
	return len(toUninstall(di)) == 0
}

var _ lib.UninstallChecker = (*deployer)(nil)

// toUninstall are the recorded resources that deleting the item deletes
// (policy permitting; deleteResources checks the marks on the target).
func toUninstall(di *lsv1alpha1.DeployItem) []manifestv1alpha2.ManagedResourceStatus {
	return slices.DeleteFunc(previousResources(di), func(r manifestv1alpha2.ManagedResourceStatus) bool { return !deletable(r.Policy) })
}

// Delete deletes the objects the item records (policy and marks
// permitting), then the export Secret.
func (d *deployer) Delete(ctx context.Context, req *lib.Request) (lib.Result, error) {
	di := req.Item
	prev := toUninstall(di)
	if len(prev) > 0 {
		c, err := d.targets.forTarget(ctx, req.Target)
		if err != nil {
			return lib.Result{}, err
		}
		sctx, span := tracing.StartStep(ctx, tracer(), lib.Kind, "DeleteManifests", attribute.Int("terrace.objects", len(prev)))
		_, done, err := d.deleteResources(sctx, c, di, prev)
		tracing.EndStep(span, err)
		if err != nil {
			return lib.Result{}, err
		}
		if !done {
			// Objects held by finalizers on the target, which the deployer
			// does not watch: look again, backing off like apply (1 s to
			// 15 s since the deletion started), and at the deadline at the
			// latest (the library ends the deletion there).
			return lib.PendingFor(waitUntil(waitInterval(di), req.Deadline), "waiting for managed objects to be deleted"), nil
		}
	}
	if err := lib.DeleteExport(ctx, d.client, di); err != nil {
		return lib.Result{}, err
	}
	return lib.Done(), nil
}
