package helm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/util/validation"

	helmv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/helm/v1alpha1"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// config is a parsed provider configuration.
type config struct {
	spec   helmv1alpha1.ProviderConfiguration
	values chartutil.Values
	ops    operationOptions
}

// parseConfig decodes spec.config strictly; every problem is a
// configuration error naming the field.
// minEvery is the most frequent continuousReconcile allowed.
func parseConfig(di *lsv1alpha1.DeployItem, minEvery time.Duration) (*config, error) {
	if di.Spec.Config == nil || len(di.Spec.Config.Raw) == 0 {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "spec.config: a helm deploy item needs a ProviderConfiguration")
	}
	cfg := &config{}
	dec := json.NewDecoder(bytes.NewReader(di.Spec.Config.Raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg.spec); err != nil {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "spec.config: %v", err)
	}
	s := &cfg.spec
	if gv := helmv1alpha1.SchemeGroupVersion.String(); s.APIVersion != gv || s.Kind != "ProviderConfiguration" {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "spec.config: apiVersion %q, kind %q: want %s, ProviderConfiguration", s.APIVersion, s.Kind, gv)
	}
	if errs := validation.IsDNS1123Subdomain(s.Name); s.Name == "" || len(errs) > 0 || len(s.Name) > 53 {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "spec.config.name: %q is not a valid release name (a DNS subdomain of at most 53 characters)", s.Name)
	}
	if errs := validation.IsDNS1123Label(s.Namespace); len(errs) > 0 {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "spec.config.namespace: %q is not a valid namespace: %s", s.Namespace, strings.Join(errs, "; "))
	}
	switch s.UpdateStrategy {
	case "", helmv1alpha1.UpdateStrategyUpdate, helmv1alpha1.UpdateStrategyPatch:
	default:
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "spec.config.updateStrategy: %q is not one of update, patch", s.UpdateStrategy)
	}
	if err := checkContinuous(s.ContinuousReconcile, minEvery); err != nil {
		return nil, err
	}
	vals, err := parseValues(s.Values)
	if err != nil {
		return nil, err
	}
	cfg.values = vals
	if cfg.ops, err = parseOperations(s.HelmDeploymentConfig); err != nil {
		return nil, err
	}
	return cfg, nil
}

func parseValues(raw json.RawMessage) (chartutil.Values, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return chartutil.Values{}, nil
	}
	var vals map[string]any
	if err := json.Unmarshal(raw, &vals); err != nil {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "spec.config.values: not a JSON object: %v", err)
	}
	return vals, nil
}

// operationOptions are the options of helmDeploymentConfig.
type operationOptions struct {
	install, upgrade operationOption
	uninstall        operationOption
}

// operationOption are the Helm command-line options an operation accepts.
type operationOption struct {
	Atomic               bool
	Force                bool
	Wait                 bool
	TakeOwnership        bool
	SkipSchemaValidation bool
	Timeout              time.Duration
}

// Keys of helmDeploymentConfig each operation accepts.
var (
	installKeys   = []string{"atomic", "force", "skipSchemaValidation", "takeOwnership", "timeout", "wait"}
	upgradeKeys   = installKeys
	uninstallKeys = []string{"timeout", "wait"}
)

func parseOperations(c *helmv1alpha1.HelmDeploymentConfiguration) (operationOptions, error) {
	var out operationOptions
	if c == nil {
		return out, nil
	}
	var err error
	if out.install, err = parseOperation("install", c.Install, installKeys); err != nil {
		return out, err
	}
	if out.upgrade, err = parseOperation("upgrade", c.Upgrade, upgradeKeys); err != nil {
		return out, err
	}
	out.uninstall, err = parseOperation("uninstall", c.Uninstall, uninstallKeys)
	return out, err
}

func parseOperation(op string, m map[string]lsv1alpha1.AnyJSON, allowed []string) (operationOption, error) {
	var o operationOption
	for _, k := range slices.Sorted(maps.Keys(m)) {
		field := fmt.Sprintf("spec.config.helmDeploymentConfig.%s.%s", op, k)
		if !slices.Contains(allowed, k) {
			return o, lib.ConfigError(lib.ReasonInvalidConfig, "%s: unknown option; %s accepts %s", field, op, strings.Join(allowed, ", "))
		}
		raw := m[k].RawMessage
		if k == "timeout" {
			var s string
			var d time.Duration
			err := json.Unmarshal(raw, &s)
			if err == nil {
				d, err = time.ParseDuration(s)
			}
			if err != nil || d <= 0 {
				return o, lib.ConfigError(lib.ReasonInvalidConfig, "%s: %s is not a positive duration such as \"5m\"", field, raw)
			}
			o.Timeout = d
			continue
		}
		var b bool
		if err := json.Unmarshal(raw, &b); err != nil {
			return o, lib.ConfigError(lib.ReasonInvalidConfig, "%s: %s is not true or false", field, raw)
		}
		*o.flag(k) = b
	}
	return o, nil
}

func (o *operationOption) flag(k string) *bool {
	switch k {
	case "atomic":
		return &o.Atomic
	case "force":
		return &o.Force
	case "wait":
		return &o.Wait
	case "takeOwnership":
		return &o.TakeOwnership
	default:
		return &o.SkipSchemaValidation
	}
}
