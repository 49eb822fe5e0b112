package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	manifestv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/manifest/v1alpha1"
	manifestv1alpha2 "github.com/terrace-dev/terrace/apis/deployers/manifest/v1alpha2"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// config is a provider configuration of either version, normalised to v1alpha2.
type config struct {
	// version is the apiVersion the item used; the provider status uses it too.
	version string
	spec    manifestv1alpha2.ProviderConfiguration
	// objects are the parsed manifests (nil for policy ignore).
	objects []manifestEntry
	// The following are set only for another deployer's ObjectSet.
	// status renders the provider status (default: providerStatus).
	status func([]manifestv1alpha2.ManagedResourceStatus) ([]byte, error)
	// exportFields name spec.exports.exports in messages (default
	// spec.config.exports.exports[i]).
	exportFields []string
	// values are exported as they are, beside spec.exports.
	values map[string]any
}

// exportField names the i-th export in messages.
func (c *config) exportField(i int) string {
	if i < len(c.exportFields) {
		return c.exportFields[i]
	}
	return fmt.Sprintf("spec.config.exports.exports[%d]", i)
}

type manifestEntry struct {
	// field names the manifest in messages, e.g. spec.config.manifests[2].
	field  string
	policy manifestv1alpha2.ManifestPolicy
	obj    *unstructured.Unstructured
	hooks  objectHooks
}

func strictDecode(raw []byte, into any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(into)
}

// parseConfig decodes spec.config strictly; every problem is a configuration
// error naming the field.
func parseConfig(di *lsv1alpha1.DeployItem) (*config, error) {
	cfg, err := decodeConfig(di)
	if err != nil {
		return nil, err
	}
	switch cfg.spec.UpdateStrategy {
	case "", manifestv1alpha2.UpdateStrategyUpdate, manifestv1alpha2.UpdateStrategyPatch:
	default:
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "spec.config.updateStrategy: %q is not one of update, patch", cfg.spec.UpdateStrategy)
	}
	seen := map[string]string{}
	for i, m := range cfg.spec.Manifests {
		e, err := parseManifest(cfg.version, i, m)
		if err != nil {
			return nil, err
		}
		key := e.obj.GroupVersionKind().GroupKind().String() + " " + e.obj.GetNamespace() + "/" + e.obj.GetName()
		if prev, ok := seen[key]; ok {
			return nil, lib.ConfigError(lib.ReasonInvalidConfig, "%s: %s is already defined in %s", e.field, key, prev)
		}
		seen[key] = e.field
		cfg.objects = append(cfg.objects, e)
	}
	if cr := cfg.spec.ContinuousReconcile; cr != nil && cr.Every != nil && cr.Every.Duration <= 0 {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "spec.config.continuousReconcile.every: %s must be positive", cr.Every.Duration)
	}
	return cfg, nil
}

// decodeConfig decodes spec.config in its apiVersion, normalised to v1alpha2
// (a v1alpha1 manifest has policy manage).
func decodeConfig(di *lsv1alpha1.DeployItem) (*config, error) {
	if di.Spec.Config == nil || len(di.Spec.Config.Raw) == 0 {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "spec.config: a manifest deploy item needs a ProviderConfiguration")
	}
	raw := di.Spec.Config.Raw
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &tm); err != nil {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "spec.config: %v", err)
	}
	if tm.Kind != "ProviderConfiguration" {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "spec.config.kind: %q is not ProviderConfiguration", tm.Kind)
	}
	cfg := &config{version: tm.APIVersion}
	switch tm.APIVersion {
	case manifestv1alpha1.SchemeGroupVersion.String():
		var v1 manifestv1alpha1.ProviderConfiguration
		if err := strictDecode(raw, &v1); err != nil {
			return nil, lib.ConfigError(lib.ReasonInvalidConfig, "spec.config: not a valid %s ProviderConfiguration: %v", tm.APIVersion, err)
		}
		cfg.spec.UpdateStrategy = manifestv1alpha2.UpdateStrategy(v1.UpdateStrategy)
		for i := range v1.Manifests {
			cfg.spec.Manifests = append(cfg.spec.Manifests, manifestv1alpha2.Manifest{Policy: manifestv1alpha2.ManagePolicy, Manifest: &v1.Manifests[i]})
		}
	case manifestv1alpha2.SchemeGroupVersion.String():
		if err := strictDecode(raw, &cfg.spec); err != nil {
			return nil, lib.ConfigError(lib.ReasonInvalidConfig, "spec.config: not a valid %s ProviderConfiguration: %v", tm.APIVersion, err)
		}
	default:
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "spec.config.apiVersion: %q is not %s or %s",
			tm.APIVersion, manifestv1alpha1.SchemeGroupVersion, manifestv1alpha2.SchemeGroupVersion)
	}
	return cfg, nil
}

// parseManifest checks the i-th manifest of a configuration of version and
// decodes its object.
func parseManifest(version string, i int, m manifestv1alpha2.Manifest) (manifestEntry, error) {
	field := fmt.Sprintf("spec.config.manifests[%d]", i)
	policy := m.Policy
	switch policy {
	case "":
		policy = manifestv1alpha2.ManagePolicy
	case manifestv1alpha2.ManagePolicy, manifestv1alpha2.FallbackPolicy, manifestv1alpha2.KeepPolicy,
		manifestv1alpha2.IgnorePolicy, manifestv1alpha2.ImmutablePolicy:
	default:
		return manifestEntry{}, lib.ConfigError(lib.ReasonInvalidConfig, "%s.policy: %q is not one of manage, fallback, keep, ignore, immutable", field, policy)
	}
	if version == manifestv1alpha2.SchemeGroupVersion.String() {
		field += ".manifest"
	}
	if m.Manifest == nil || len(m.Manifest.Raw) == 0 {
		return manifestEntry{}, lib.ConfigError(lib.ReasonInvalidConfig, "%s: the manifest is empty", field)
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(m.Manifest.Raw); err != nil {
		return manifestEntry{}, lib.ConfigError(lib.ReasonInvalidConfig, "%s: not a Kubernetes object: %v", field, err)
	}
	if obj.GetName() == "" {
		return manifestEntry{}, lib.ConfigError(lib.ReasonInvalidConfig, "%s.metadata.name: must be set", field)
	}
	hooks, err := parseHooks(fmt.Sprintf("spec.config.manifests[%d]", i), m)
	if err != nil {
		return manifestEntry{}, err
	}
	return manifestEntry{field: field, policy: policy, obj: obj, hooks: hooks}, nil
}

// previousResources reads the managed resources recorded in the provider status.
func previousResources(di *lsv1alpha1.DeployItem) []manifestv1alpha2.ManagedResourceStatus {
	if di.Status.ProviderStatus == nil || len(di.Status.ProviderStatus.Raw) == 0 {
		return nil
	}
	var st manifestv1alpha2.ProviderStatus
	if err := json.Unmarshal(di.Status.ProviderStatus.Raw, &st); err != nil {
		return nil
	}
	return st.ManagedResources
}

// providerStatus renders the managed resources in the configuration's version.
func providerStatus(version string, managed []manifestv1alpha2.ManagedResourceStatus) ([]byte, error) {
	if version == manifestv1alpha1.SchemeGroupVersion.String() {
		st := manifestv1alpha1.ProviderStatus{}
		st.APIVersion, st.Kind = version, "ProviderStatus"
		for _, m := range managed {
			st.ManagedResources = append(st.ManagedResources, manifestv1alpha1.ManagedResourceStatus{
				Policy:         string(m.Policy),
				UpdateStrategy: manifestv1alpha1.UpdateStrategy(m.UpdateStrategy),
				Resource:       manifestv1alpha1.TypedObjectReference(m.Resource),
			})
		}
		return json.Marshal(st)
	}
	st := manifestv1alpha2.ProviderStatus{ManagedResources: managed}
	st.APIVersion, st.Kind = manifestv1alpha2.SchemeGroupVersion.String(), "ProviderStatus"
	return json.Marshal(st)
}
