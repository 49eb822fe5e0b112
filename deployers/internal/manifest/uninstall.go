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
		res, err := d.uninstall(ctx, c, req, prev, deletionGroupsOf(di))
		if err != nil || res.Pending {
			return res, err
		}
	}
	if err := lib.DeleteExport(ctx, d.client, di); err != nil {
		return lib.Result{}, err
	}
	return lib.Done(), nil
}

// deletionGroupsOf are the item's deletion groups. A configuration that no
// longer parses, or whose groups are malformed, deletes in the default
// order: it must not keep the item's objects from being deleted.
func deletionGroupsOf(di *lsv1alpha1.DeployItem) []manifestv1alpha2.DeletionGroupDefinition {
	cfg, err := decodeConfig(di)
	if err != nil || validateDeletionGroups("spec.config.deletionGroups", cfg.spec.DeletionGroups) != nil {
		return nil
	}
	return cfg.spec.DeletionGroups
}

// uninstall deletes prev, the item's recorded objects, in the order of
// groups: Done when all are gone, else pending.
func (d *deployer) uninstall(ctx context.Context, c *clusterClient, req *lib.Request, prev []manifestv1alpha2.ManagedResourceStatus,
	groups []manifestv1alpha2.DeletionGroupDefinition,
) (lib.Result, error) {
	sctx, span := tracing.StartStep(ctx, tracer(), lib.Kind, "DeleteManifests", attribute.Int("terrace.objects", len(prev)))
	_, done, err := d.deleteResources(sctx, c, req.Item, prev, groups)
	tracing.EndStep(span, err)
	if err != nil {
		return lib.Result{}, err
	}
	if !done {
		// Objects held by finalizers on the target, which the deployer
		// does not watch: look again, backing off like apply (1 s to
		// 15 s since the deletion started), and at the deadline at the
		// latest (the library ends the deletion there).
		return lib.PendingFor(waitUntil(waitInterval(req.Item), req.Deadline), "waiting for managed objects to be deleted"), nil
	}
	return lib.Done(), nil
}
