package helm

import (
	"context"
	"encoding/json"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	helmv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/helm/v1alpha1"
	manifestv1alpha2 "github.com/terrace-dev/terrace/apis/deployers/manifest/v1alpha2"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/manifest"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// TracerName names the helm deployer's tracer; its spans are children of
// the library's "DeployItem.Apply" / "DeployItem.Delete".
const TracerName = "github.com/terrace-dev/terrace/deployers/internal/helm"

func tracer() trace.Tracer { return otel.Tracer(TracerName) }

// Reconcile fetches the chart and deploys it: as a Helm release (install
// or upgrade), or, with helmDeployment: false, as rendered objects applied
// by the manifest deployer's machinery. Then it waits for readiness and
// writes the exports.
func (d *deployer) Reconcile(ctx context.Context, req *lib.Request) (lib.Result, error) {
	cfg, err := parseConfig(req.Item, d.minEvery)
	if err != nil {
		return lib.Result{}, err
	}
	set, err := checkSet(cfg)
	if err != nil {
		return lib.Result{}, err
	}
	ch, err := d.charts.load(ctx, req, cfg.spec.Chart)
	if err != nil {
		return lib.Result{}, err
	}
	g, err := d.targets.forTarget(ctx, req.Target)
	if err != nil {
		return lib.Result{}, err
	}
	ap, err := d.applier(g)
	if err != nil {
		return lib.Result{}, err
	}
	if !cfg.spec.IsHelmDeployment() {
		return applyRendered(ctx, req, g, ap, cfg, set, ch)
	}
	return d.deployAsRelease(ctx, req, g, ap, cfg, set, ch)
}

// deployAsRelease installs or upgrades the release, records its objects,
// then checks their readiness and writes the exports.
func (d *deployer) deployAsRelease(ctx context.Context, req *lib.Request, g *targetGetter, ap *manifest.Applier, cfg *config, set *manifest.ObjectSet, ch *chart.Chart) (lib.Result, error) {
	ac, err := d.actionConfig(g, cfg.spec.Namespace, req.Log)
	if err != nil {
		return lib.Result{}, err
	}
	if len(ch.CRDObjects()) > 0 {
		// Helm installs the chart's CRDs first and then reads the
		// capabilities afresh, so that the templates see the new kinds.
		ac.Capabilities = nil
	}
	// Recorded before Helm writes anything: a failed install may leave a
	// release behind, and deleting the item must uninstall it.
	if req.Item.Status.ProviderStatus == nil {
		if err := setProviderStatus(req.Item, nil); err != nil {
			return lib.Result{}, err
		}
	}
	sctx, span := tracing.StartStep(ctx, tracer(), lib.Kind, "DeployRelease")
	rel, err := d.deployRelease(sctx, ac, req.Item, cfg, ch, req.Forced)
	tracing.EndStep(span, err)
	if err != nil {
		return lib.Result{}, err
	}
	if err := setProviderStatus(req.Item, managedResources(rel, g.mapper)); err != nil {
		return lib.Result{}, err
	}
	deployed, err := manifestObjects(rel.Manifest, rel.Namespace, ap.Mapper)
	if err != nil {
		return lib.Result{}, err
	}
	msg := fmt.Sprintf("release %s/%s revision %d deployed", rel.Namespace, rel.Name, rel.Version)
	return ap.Check(ctx, req, set, objectsOf(deployed), msg)
}

// applyRendered renders the chart and applies its objects as the manifest
// deployer does (helmDeployment: false): no Helm release is kept.
func applyRendered(ctx context.Context, req *lib.Request, g *targetGetter, ap *manifest.Applier, cfg *config, set *manifest.ObjectSet, ch *chart.Chart) (lib.Result, error) {
	objs, err := render(g, ap.Mapper, cfg, ch, req.Log)
	if err != nil {
		return lib.Result{}, err
	}
	set.Objects, set.Status = objs, helmStatus
	if cfg.spec.UpdateStrategy != "" {
		set.UpdateStrategy = manifestv1alpha2.UpdateStrategy(cfg.spec.UpdateStrategy)
	}
	return ap.Apply(ctx, req, set)
}

// NothingToUninstall (lib.UninstallChecker): nothing is recorded, so no
// Helm operation was ever started for the item.
// With helmDeployment: false, the item records no object to delete.
func (d *deployer) NothingToUninstall(di *lsv1alpha1.DeployItem) bool {
	if di.Status.ProviderStatus == nil || len(di.Status.ProviderStatus.Raw) == 0 {
		return true
	}
	spec := lenientSpec(di)
	return !spec.IsHelmDeployment() && manifest.NothingRecorded(di)
}

// lenientSpec decodes spec.config leniently: a configuration that no
// longer parses must not keep its objects from being deleted.
func lenientSpec(di *lsv1alpha1.DeployItem) helmv1alpha1.ProviderConfiguration {
	var spec helmv1alpha1.ProviderConfiguration
	if di.Spec.Config != nil {
		_ = json.Unmarshal(di.Spec.Config.Raw, &spec)
	}
	return spec
}

var _ lib.UninstallChecker = (*deployer)(nil)

// Delete uninstalls the release (with helmDeployment: false, deletes the
// recorded objects in the order of deletionGroups), then deletes the
// export Secret.
func (d *deployer) Delete(ctx context.Context, req *lib.Request) (lib.Result, error) {
	di := req.Item
	if !d.NothingToUninstall(di) {
		spec := lenientSpec(di)
		if !spec.IsHelmDeployment() {
			res, err := d.deleteObjects(ctx, req, spec)
			if err != nil || res.Pending {
				return res, err
			}
		} else if spec.Name != "" && spec.Namespace != "" {
			var un operationOption
			if ops, err := parseOperations(spec.HelmDeploymentConfig); err == nil {
				un = ops.uninstall
			}
			g, err := d.targets.forTarget(ctx, req.Target)
			if err != nil {
				return lib.Result{}, err
			}
			ac, err := d.actionConfig(g, spec.Namespace, req.Log)
			if err != nil {
				return lib.Result{}, err
			}
			sctx, span := tracing.StartStep(ctx, tracer(), lib.Kind, "UninstallRelease")
			err = uninstall(sctx, ac, di, spec.Name, spec.Namespace, un)
			tracing.EndStep(span, err)
			if err != nil {
				return lib.Result{}, err
			}
		}
	}
	if err := lib.DeleteExport(ctx, d.client, di); err != nil {
		return lib.Result{}, err
	}
	return lib.Done(), nil
}

// managedResources lists the objects of the release's manifest; Helm puts
// namespaced objects without a namespace into the release namespace.
func managedResources(rel *release.Release, mapper meta.RESTMapper) []helmv1alpha1.ManagedResourceStatus {
	var out []helmv1alpha1.ManagedResourceStatus
	for _, doc := range releaseutil.SplitManifests(rel.Manifest) {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if yaml.Unmarshal([]byte(doc), &head) != nil || head.Kind == "" {
			continue
		}
		ns := head.Metadata.Namespace
		if ns == "" && namespaced(mapper, head.APIVersion, head.Kind) {
			ns = rel.Namespace
		}
		out = append(out, helmv1alpha1.ManagedResourceStatus{Policy: "manage", Resource: helmv1alpha1.ObjectReference{
			APIVersion: head.APIVersion, Kind: head.Kind, Name: head.Metadata.Name, Namespace: ns,
		}})
	}
	return out
}

func setProviderStatus(di *lsv1alpha1.DeployItem, managed []helmv1alpha1.ManagedResourceStatus) error {
	ps := helmv1alpha1.ProviderStatus{ManagedResources: managed}
	ps.APIVersion, ps.Kind = helmv1alpha1.SchemeGroupVersion.String(), "ProviderStatus"
	raw, err := json.Marshal(ps)
	if err != nil {
		return err
	}
	di.Status.ProviderStatus = &runtime.RawExtension{Raw: raw}
	return nil
}

func namespaced(mapper meta.RESTMapper, apiVersion, kind string) bool {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return true
	}
	m, err := mapper.RESTMapping(gv.WithKind(kind).GroupKind(), gv.Version)
	return err != nil || m.Scope.Name() == meta.RESTScopeNameNamespace
}

// deleteObjects deletes the objects a helmDeployment: false item records.
func (d *deployer) deleteObjects(ctx context.Context, req *lib.Request, spec helmv1alpha1.ProviderConfiguration) (lib.Result, error) {
	g, err := d.targets.forTarget(ctx, req.Target)
	if err != nil {
		return lib.Result{}, err
	}
	ap, err := d.applier(g)
	if err != nil {
		return lib.Result{}, err
	}
	return ap.Delete(ctx, req, deletionGroupsOf(spec.DeletionGroups))
}
