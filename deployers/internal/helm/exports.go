package helm

import (
	"context"
	"encoding/json"
	"fmt"

	helmv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/helm/v1alpha1"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// valueExports evaluates the exports read from the values (those without
// fromResource, whose jsonPath starts at .Values) into the export
// document; nil when the item exports nothing. Exports from deployed
// objects are refused for now.
func valueExports(cfg *config) ([]byte, error) {
	list := append([]helmv1alpha1.Export(nil), cfg.spec.ExportsFromManifests...)
	if cfg.spec.Exports != nil {
		list = append(list, cfg.spec.Exports.Exports...)
	}
	if len(list) == 0 {
		return nil, nil
	}
	root := map[string]any{"Values": map[string]any(cfg.values)}
	out := map[string]any{}
	for i, e := range list {
		field := exportField(cfg, i)
		if e.FromResource != nil || e.FromObjectReference != nil {
			return nil, lib.ConfigError(ReasonChartNotSupported, "%s (key %q): exports from deployed objects (fromResource, fromObjectRef) are not supported yet by the helm deployer; export from the values (jsonPath: .Values...)", field, e.Key)
		}
		if e.Key == "" {
			return nil, lib.ConfigError(lib.ReasonInvalidConfig, "%s: key must be set", field)
		}
		v, found, err := lib.JSONPathValue(root, e.JSONPath)
		if err != nil {
			return nil, lib.ConfigError(lib.ReasonInvalidConfig, "%s.jsonPath %q: %v", field, e.JSONPath, err)
		}
		if !found {
			return nil, lib.ConfigError(lib.ReasonInvalidConfig, "%s.jsonPath %q: no such value in the values (an export without fromResource reads .Values...)", field, e.JSONPath)
		}
		out[e.Key] = v
	}
	return json.Marshal(out)
}

// exportField names the i-th export of exportsFromManifests + exports.exports.
func exportField(cfg *config, i int) string {
	if n := len(cfg.spec.ExportsFromManifests); i >= n {
		return fmt.Sprintf("spec.config.exports.exports[%d]", i-n)
	}
	return fmt.Sprintf("spec.config.exportsFromManifests[%d]", i)
}

// writeExports writes the export Secret, or clears a former one when the
// item exports nothing (any more).
func (d *deployer) writeExports(ctx context.Context, di *lsv1alpha1.DeployItem, data []byte) error {
	if data == nil {
		return lib.ClearExport(ctx, d.client, di)
	}
	return lib.WriteExport(ctx, d.client, d.fieldOwner, di, data)
}
