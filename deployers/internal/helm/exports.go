package helm

import (
	"fmt"

	manifestv1alpha2 "github.com/terrace-dev/terrace/apis/deployers/manifest/v1alpha2"
	"github.com/terrace-dev/terrace/deployers/internal/manifest"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// exportsOf splits exportsFromManifests + exports.exports: those without
// fromResource read the values (jsonPath .Values...) and are evaluated
// now; those with fromResource are read from the deployed objects on the
// target by the manifest deployer's machinery.
func exportsOf(cfg *config) (map[string]any, []manifest.SetExport, error) {
	list := cfg.spec.ExportsFromManifests
	if cfg.spec.Exports != nil {
		list = append(list[:len(list):len(list)], cfg.spec.Exports.Exports...)
	}
	root := map[string]any{"Values": map[string]any(cfg.values)}
	values := map[string]any{}
	var fromObjects []manifest.SetExport
	for i, e := range list {
		field := exportField(cfg, i)
		if e.Key == "" {
			return nil, nil, lib.ConfigError(lib.ReasonInvalidConfig, "%s: key must be set", field)
		}
		if e.FromObjectReference != nil && e.FromResource == nil {
			return nil, nil, lib.ConfigError(lib.ReasonInvalidConfig, "%s.fromObjectRef (key %q): needs fromResource, the object holding the reference", field, e.Key)
		}
		if e.FromResource != nil {
			fromObjects = append(fromObjects, manifest.SetExport{Field: field, Export: manifestv1alpha2.Export{
				Key: e.Key, JSONPath: e.JSONPath, FromResource: (*manifestv1alpha2.TypedObjectReference)(e.FromResource),
				FromObjectReference: (*manifestv1alpha2.FromObjectReference)(e.FromObjectReference),
			}})
			continue
		}
		v, found, err := lib.JSONPathValue(root, e.JSONPath)
		if err != nil {
			return nil, nil, lib.ConfigError(lib.ReasonInvalidConfig, "%s.jsonPath %q: %v", field, e.JSONPath, err)
		}
		if !found {
			return nil, nil, lib.ConfigError(lib.ReasonInvalidConfig, "%s.jsonPath %q: no such value in the values (an export without fromResource reads .Values...)", field, e.JSONPath)
		}
		values[e.Key] = v
	}
	return values, fromObjects, nil
}

// exportField names the i-th export of exportsFromManifests + exports.exports.
func exportField(cfg *config, i int) string {
	if n := len(cfg.spec.ExportsFromManifests); i >= n {
		return fmt.Sprintf("spec.config.exports.exports[%d]", i-n)
	}
	return fmt.Sprintf("spec.config.exportsFromManifests[%d]", i)
}
