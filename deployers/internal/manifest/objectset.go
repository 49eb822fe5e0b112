package manifest

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	manifestv1alpha2 "github.com/terrace-dev/terrace/apis/deployers/manifest/v1alpha2"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/kit/flow"
)

// ObjectSet is what another deployer (the helm deployer rendering a chart
// with helmDeployment: false) deploys with the manifest deployer's
// machinery: the objects with their policies, readiness checks, exports
// and deletion groups. Fields name where each part came from, for messages.
type ObjectSet struct {
	// Objects are applied in the safe order (CRDs, namespaces, other
	// cluster-scoped objects, namespaced objects).
	Objects []SetObject
	// UpdateStrategy says how existing objects are updated (default update).
	UpdateStrategy manifestv1alpha2.UpdateStrategy
	// ReadinessChecks are the checks, as in a manifest item's configuration
	// (field names spec.config.readinessChecks...).
	ReadinessChecks manifestv1alpha2.ReadinessCheckConfiguration
	// Exports are read from objects on the target (fromResource + jsonPath).
	Exports []SetExport
	// Values are exported as they are, beside Exports.
	Values map[string]any
	// DeletionGroups order the deletion on the item's deletion,
	// DeletionGroupsDuringUpdate that of objects which left the set
	// (field names spec.config.deletionGroups...).
	DeletionGroups, DeletionGroupsDuringUpdate []manifestv1alpha2.DeletionGroupDefinition
	// Status renders status.providerStatus from the managed objects; it
	// must keep the JSON shape of managedResources (policy, resource).
	Status func(managed []manifestv1alpha2.ManagedResourceStatus) ([]byte, error)
}

// SetObject is one object of an ObjectSet.
type SetObject struct {
	// Field names the object in messages (e.g. the chart template).
	Field string
	// Policy is manage when empty.
	Policy manifestv1alpha2.ManifestPolicy
	// Object must have a name; a namespaced one without a namespace goes
	// to "default".
	Object *unstructured.Unstructured
}

// SetExport is one export of an ObjectSet, Field naming it in messages.
type SetExport struct {
	Field string
	manifestv1alpha2.Export
}

// Validate checks the readiness checks, exports and deletion groups: every
// problem is a configuration error naming the field.
func (s *ObjectSet) Validate() error {
	if err := validateReadiness(s.ReadinessChecks); err != nil {
		return err
	}
	for _, e := range s.Exports {
		if e.Key == "" || e.FromResource == nil || e.JSONPath == "" {
			return lib.ConfigError(lib.ReasonInvalidConfig, "%s: key, jsonPath and fromResource must be set", e.Field)
		}
		if _, _, err := lib.JSONPathValue(map[string]any{}, e.JSONPath); err != nil {
			return lib.ConfigError(ReasonExportFailed, "%s.jsonPath: %v", e.Field, err)
		}
		if r := e.FromObjectReference; r != nil && (r.APIVersion == "" || r.Kind == "" || r.JSONPath == "") {
			return lib.ConfigError(lib.ReasonInvalidConfig, "%s.fromObjectRef: apiVersion, kind and jsonPath must be set", e.Field)
		}
	}
	if err := validateDeletionGroups("spec.config.deletionGroups", s.DeletionGroups); err != nil {
		return err
	}
	return validateDeletionGroups("spec.config.deletionGroupsDuringUpdate", s.DeletionGroupsDuringUpdate)
}

// config is s as a manifest configuration.
func (s *ObjectSet) config() (*config, error) {
	cfg := &config{status: s.Status, values: s.Values}
	cfg.spec.UpdateStrategy = s.UpdateStrategy
	cfg.spec.ReadinessChecks = s.ReadinessChecks
	cfg.spec.DeletionGroups, cfg.spec.DeletionGroupsDuringUpdate = s.DeletionGroups, s.DeletionGroupsDuringUpdate
	if len(s.Exports) > 0 {
		cfg.spec.Exports = &manifestv1alpha2.ExportConfiguration{}
		for _, e := range s.Exports {
			cfg.spec.Exports.Exports = append(cfg.spec.Exports.Exports, e.Export)
			cfg.exportFields = append(cfg.exportFields, e.Field)
		}
	}
	seen := map[string]string{}
	for _, o := range s.Objects {
		if o.Object.GetName() == "" {
			return nil, lib.ConfigError(lib.ReasonInvalidConfig, "%s: %s without metadata.name", o.Field, o.Object.GetKind())
		}
		key := o.Object.GroupVersionKind().GroupKind().String() + " " + o.Object.GetNamespace() + "/" + o.Object.GetName()
		if prev, ok := seen[key]; ok {
			return nil, lib.ConfigError(lib.ReasonInvalidConfig, "%s: %s is already defined in %s", o.Field, key, prev)
		}
		seen[key] = o.Field
		policy := o.Policy
		if policy == "" {
			policy = manifestv1alpha2.ManagePolicy
		}
		cfg.objects = append(cfg.objects, manifestEntry{field: o.Field, policy: policy, obj: o.Object})
	}
	return cfg, nil
}

// Applier deploys ObjectSets on one target cluster for another deployer:
// the same apply, ownership marks, deletion, readiness and exports as the
// manifest deployer's, recorded in the item's status.providerStatus.
type Applier struct {
	// Host is the deploy items' cluster (export Secrets).
	Host client.Client
	// FieldOwner is the deployer's name: the field manager on the target.
	FieldOwner string
	// Target and Mapper are the client and REST mapper of the target cluster.
	Target client.Client
	Mapper meta.RESTMapper
}

func (a *Applier) parts() (*deployer, *clusterClient) {
	return &deployer{client: a.Host, fieldOwner: a.FieldOwner}, &clusterClient{Client: a.Target, mapper: a.Mapper}
}

// Apply applies the set for req's item, deletes the objects the item
// records that left the set, waits for readiness and writes the exports.
func (a *Applier) Apply(ctx context.Context, req *lib.Request, set *ObjectSet) (lib.Result, error) {
	cfg, err := set.config()
	if err != nil {
		return lib.Result{}, err
	}
	d, c := a.parts()
	j := &applyJob{req: req, di: req.Item, cfg: cfg, c: c, prev: previousResources(req.Item)}
	return d.run(ctx, j, d.applySteps()...)
}

// Check waits for the readiness of objects deployed otherwise (a Helm
// release's), then writes the exports; deployed name the objects (their
// namespaces set). message is the result's message once all is ready.
func (a *Applier) Check(ctx context.Context, req *lib.Request, set *ObjectSet, deployed []*unstructured.Unstructured, message string) (lib.Result, error) {
	cfg, err := set.config()
	if err != nil {
		return lib.Result{}, err
	}
	d, c := a.parts()
	j := &applyJob{req: req, di: req.Item, cfg: cfg, c: c, applied: deployed}
	out, err := flow.Run(ctx, j, d.checkApplied, d.writeExports, d.awaitReadiness)
	if err != nil {
		return lib.Result{}, err
	}
	if out.Stopped() {
		return j.result, nil
	}
	return lib.Result{Message: message}, nil
}

// Delete deletes the objects the item records (policy and marks
// permitting) in the order of groups; Done when all are gone, else pending.
// The caller deletes the export Secret after.
func (a *Applier) Delete(ctx context.Context, req *lib.Request, groups []manifestv1alpha2.DeletionGroupDefinition) (lib.Result, error) {
	di := req.Item
	prev := toUninstall(di)
	if len(prev) == 0 {
		return lib.Done(), nil
	}
	if validateDeletionGroups("spec.config.deletionGroups", groups) != nil {
		groups = nil // malformed groups must not keep the objects from being deleted
	}
	d, c := a.parts()
	return d.uninstall(ctx, c, req, prev, groups)
}

// NothingRecorded reports whether the item records no object deleting it
// would delete (see NothingToUninstall).
func NothingRecorded(di *lsv1alpha1.DeployItem) bool { return len(toUninstall(di)) == 0 }
