package helm

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// Reasons of release errors.
const (
	// ReasonRenderFailed: the chart does not render with the values, or
	// the values fail the chart's schema.
	ReasonRenderFailed = "ChartRenderFailed"
	// ReasonReleaseFailed: Helm's install, upgrade or uninstall failed.
	ReasonReleaseFailed = "ReleaseFailed"
	// ReasonReleaseRecordTooLarge: a release record on the target is larger,
	// decompressed, than --max-release-record-bytes.
	ReasonReleaseRecordTooLarge = "ReleaseRecordTooLarge"
)

// defaultOperationTimeout is Helm's own default for --timeout.
const defaultOperationTimeout = 5 * time.Minute

// actionConfig is Helm's configuration for one release namespace, with
// release records in Secrets of that namespace on the target, in Helm's
// format (releaseSecrets).
func (d *deployer) actionConfig(g *targetGetter, namespace string, log logr.Logger) (*action.Configuration, error) {
	ac := &action.Configuration{}
	debug := func(format string, v ...any) { log.V(1).Info(fmt.Sprintf(format, v...)) }
	if err := ac.Init(g, namespace, "secret", debug); err != nil {
		return nil, fmt.Errorf("setting up Helm for namespace %s: %w", namespace, err)
	}
	if kc, ok := ac.KubeClient.(*kube.Client); ok {
		kc.Namespace = namespace
	}
	ac.Releases = storage.Init(newReleaseSecrets(g.core.Secrets(namespace), namespace, d.maxRecord, debug))
	caps, err := g.capabilities()
	if err != nil {
		return nil, err
	}
	ac.Capabilities = caps
	return ac, nil
}

// deployRelease installs the release, or upgrades it when it exists and
// its chart or values changed; an unchanged release is left alone, unless
// the reconcile is forced (continuousReconcile): then the upgrade puts back
// what drifted on the target.
func (d *deployer) deployRelease(ctx context.Context, ac *action.Configuration, di *lsv1alpha1.DeployItem, cfg *config, ch *chart.Chart, forced bool) (*release.Release, error) {
	name, ns := cfg.spec.Name, cfg.spec.Namespace
	last, err := ac.Releases.Last(name)
	switch {
	case errors.Is(err, driver.ErrReleaseNotFound):
		return d.install(ctx, ac, di, cfg, ch)
	case err != nil:
		return nil, historyError(ns, name, err)
	}
	if err := checkOwner(di, last); err != nil {
		return nil, err
	}
	if !forced && last.Info != nil && last.Info.Status == release.StatusDeployed && sameContent(last, ch, cfg) {
		return last, nil
	}
	if last.Info != nil && last.Info.Status == release.StatusUninstalled {
		return d.install(ctx, ac, di, cfg, ch)
	}
	return d.upgrade(ctx, ac, di, cfg, ch)
}

// Helm's client-side OpenAPI validation is off (DisableOpenAPIValidation):
// against every API server that knows the fieldValidation parameter it only
// asks the server's OpenAPI document whether the server validates itself,
// and parsing that document for every release was most of the deployer's
// CPU per item; what is wrong in an object is still refused by the server.
func (d *deployer) install(ctx context.Context, ac *action.Configuration, di *lsv1alpha1.DeployItem, cfg *config, ch *chart.Chart) (*release.Release, error) {
	o := cfg.ops.install
	i := action.NewInstall(ac)
	i.ReleaseName, i.Namespace, i.CreateNamespace = cfg.spec.Name, cfg.spec.Namespace, cfg.spec.CreateNamespace
	i.Atomic, i.Wait, i.Force, i.TakeOwnership, i.SkipSchemaValidation = o.Atomic, o.Wait || o.Atomic, o.Force, o.TakeOwnership, o.SkipSchemaValidation
	i.Timeout, i.DisableOpenAPIValidation, i.Labels = timeoutOr(o.Timeout), true, ownerLabels(di)
	rel, err := i.RunWithContext(ctx, ch, cfg.values)
	if err != nil {
		return nil, releaseError("install", cfg, err)
	}
	return rel, nil
}

func (d *deployer) upgrade(ctx context.Context, ac *action.Configuration, di *lsv1alpha1.DeployItem, cfg *config, ch *chart.Chart) (*release.Release, error) {
	o := cfg.ops.upgrade
	u := action.NewUpgrade(ac)
	u.Namespace, u.MaxHistory = cfg.spec.Namespace, d.maxHistory
	u.Atomic, u.Wait, u.Force, u.TakeOwnership, u.SkipSchemaValidation = o.Atomic, o.Wait || o.Atomic, o.Force, o.TakeOwnership, o.SkipSchemaValidation
	u.Timeout, u.DisableOpenAPIValidation, u.Labels = timeoutOr(o.Timeout), true, ownerLabels(di)
	rel, err := u.RunWithContext(ctx, cfg.spec.Name, ch, cfg.values)
	if err != nil {
		return nil, releaseError("upgrade", cfg, err)
	}
	return rel, nil
}

// uninstall removes the item's release; one that is not there, or is not
// the item's, is done.
func uninstall(_ context.Context, ac *action.Configuration, di *lsv1alpha1.DeployItem, name, namespace string, o operationOption) error {
	rel, err := ownedRelease(ac, di, name)
	if err != nil {
		return historyError(namespace, name, err)
	}
	if rel == nil {
		return nil
	}
	un := action.NewUninstall(ac)
	un.Wait, un.Timeout = o.Wait, timeoutOr(o.Timeout)
	if _, err := un.Run(name); err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		if large := recordTooLarge(namespace, name, err); large != nil {
			return large
		}
		return lib.TransientError(ReasonReleaseFailed, fmt.Errorf("helm uninstall of release %s/%s: %w", namespace, name, err))
	}
	return nil
}

func timeoutOr(d time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return defaultOperationTimeout
}

// releaseError tells a chart that cannot render with the values, or a
// release name taken by another release (configuration problems), from
// other failures (retried).
func releaseError(op string, cfg *config, err error) error {
	if large := recordTooLarge(cfg.spec.Namespace, cfg.spec.Name, err); large != nil {
		return large
	}
	msg := fmt.Sprintf("helm %s of release %s/%s: %v", op, cfg.spec.Namespace, cfg.spec.Name, err)
	text := err.Error()
	switch {
	case strings.Contains(text, "parse error") || strings.Contains(text, "execution error") ||
		strings.Contains(text, "template:") || strings.Contains(text, "values don't meet the specifications of the schema"):
		return lib.ConfigError(ReasonRenderFailed, "%s", msg)
	case strings.Contains(text, "cannot re-use a name that is still in use") ||
		strings.Contains(text, "exists and cannot be imported into the current release") ||
		strings.Contains(text, " is invalid: "):
		// The last: the API server refused an object of the chart as invalid.
		return lib.ConfigError(ReasonReleaseFailed, "%s", msg)
	}
	return lib.TransientError(ReasonReleaseFailed, errors.New(msg))
}

// historyError is the error of reading the release's records: retried,
// unless a record is over the bound.
func historyError(namespace, name string, err error) error {
	if large := recordTooLarge(namespace, name, err); large != nil {
		return large
	}
	return lib.TransientError(ReasonReleaseFailed, fmt.Errorf("release %s/%s: reading its history: %w", namespace, name, err))
}

// recordTooLarge is the item's error when err comes from a release record
// over the bound (nil otherwise): the record stays as large until someone
// removes it from the target, so retrying cannot help.
func recordTooLarge(namespace, name string, err error) error {
	var large *recordTooLargeError
	if !errors.As(err, &large) {
		return nil
	}
	return lib.ConfigError(ReasonReleaseRecordTooLarge, "release %s/%s: %v", namespace, name, large)
}

// sameContent reports whether the release was made from the same chart and
// values: then there is nothing to upgrade.
func sameContent(rel *release.Release, ch *chart.Chart, cfg *config) bool {
	if rel.Chart == nil {
		return false
	}
	a, errA := contentDigest(rel.Chart, rel.Config)
	b, errB := contentDigest(ch, cfg.values)
	return errA == nil && errB == nil && a == b
}

// contentDigest hashes what a release is rendered from: the chart's
// metadata, templates, default values and the user's values.
func contentDigest(ch *chart.Chart, vals map[string]any) ([32]byte, error) {
	raw, err := json.Marshal(struct {
		Metadata  *chart.Metadata
		Templates []*chart.File
		Values    map[string]any
		User      map[string]any
		Deps      int
	}{ch.Metadata, ch.Templates, ch.Values, vals, len(ch.Dependencies())})
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(raw), nil
}
