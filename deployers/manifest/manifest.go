// Package manifest is the manifest deployer (deploy items of type
// landscaper.gardener.cloud/kubernetes-manifest): it applies Kubernetes
// objects to the cluster of the item's Target (type
// landscaper.gardener.cloud/kubernetes-cluster, kubeconfig inline in
// spec.config.kubeconfig or in a Secret named by spec.secretRef, key
// "kubeconfig" by default).
//
// # Provider configuration
//
// v1alpha1 (the seed's form) applies every manifest with policy manage:
//
//	apiVersion: manifest.deployer.landscaper.gardener.cloud/v1alpha1
//	kind: ProviderConfiguration
//	manifests:
//	- apiVersion: v1
//	  kind: Namespace
//	  metadata: {name: foo}
//
// v1alpha2 adds a policy per manifest, readiness checks, exports and
// periodic re-apply:
//
//	apiVersion: manifest.deployer.landscaper.gardener.cloud/v1alpha2
//	kind: ProviderConfiguration
//	updateStrategy: update            # update (server-side apply, default) | patch (merge patch)
//	manifests:
//	- policy: manage                  # manage | fallback | keep | ignore | immutable
//	  manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: foo}}
//	readinessChecks:
//	  disableDefault: false           # default: Deployments, StatefulSets, DaemonSets, Jobs, Pods must be ready
//	  timeout: 5m                     # default: the item's spec.timeout
//	  custom:
//	  - name: cm-ready
//	    resourceSelector: [{apiVersion: v1, kind: ConfigMap, name: a, namespace: foo}]
//	    requirements: [{jsonPath: .data.state, operator: "==", values: ["ready"]}]
//	exports:
//	  exports:
//	  - key: state
//	    jsonPath: .data.state
//	    fromResource: {apiVersion: v1, kind: ConfigMap, name: a, namespace: foo}
//	continuousReconcile:
//	  every: 5m                       # re-apply a Succeeded item this often (drift correction)
//
// Policies: manage creates, updates and deletes (and takes an object over
// from another item); fallback does so only while the object is absent or
// marked as this item's (ManagedByAnnotation: another item's object, or one
// somebody else created, is left alone); keep creates and updates but never
// deletes; ignore skips the
// manifest; immutable creates the object once and never updates or deletes it.
//
// Objects are applied in a safe order (CRDs, namespaces, other cluster-scoped
// objects, namespaced objects) by server-side apply with the deployer's name
// as field manager; status.providerStatus.managedResources lists them (in the
// configuration's apiVersion). Objects that leave the configuration are
// deleted (policy permitting) after a complete apply; while one held by
// finalizers keeps the next deletion group waiting, the job stays Progressing
// (until the item's timeout) and what is not gone yet stays listed beside the
// applied objects, as it does when a deletion fails. Deleting the item
// deletes the managed objects in the reverse order (namespaced objects, then
// cluster-scoped objects, then CRDs and namespaces), unless the item carries
// landscaper.gardener.cloud/delete-without-uninstall: "true".
//
// Exports are written to the Secret "<item>-export" (key "export", a JSON
// document of key → value), named by status.exportRef.
//
// continuousReconcile is implemented as an extension hook (ShouldReconcile):
// ContinuousReconcileHook.
package manifest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	manifestv1alpha2 "github.com/terrace-dev/terrace/apis/deployers/manifest/v1alpha2"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/deployers/lib/extension"
	"github.com/terrace-dev/terrace/kit/timeout"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// Type is the deploy-item type the manifest deployer serves.
const Type = lsv1alpha1.ManifestDeployItemType

// DefaultName is the deployer name used when Options.Name is empty.
const DefaultName = "manifest-deployer"

// Options configure the manifest deployer. The zero value is usable.
type Options struct {
	// Name is the deployer's name: status.deployer.name, controller name and
	// the field manager on the deploy items and on the target cluster;
	// default "manifest-deployer". Two deployers in one manager need distinct names.
	Name string
	// Identity is status.deployer.identity; default Name.
	Identity string
	// Version is status.deployer.version.
	Version string
	// TargetSelector restricts the items served to those whose Target matches.
	TargetSelector lib.TargetSelector
	// DefaultTimeout bounds a job whose item has no spec.timeout (default 10m; see lib.Options).
	DefaultTimeout timeout.Timeout
	// Namespaces restricts the deploy items served to these namespaces
	// (default: all). Set it when the manager's cache is restricted to
	// namespaces (e.g. one manager per test namespace): the deployer watches
	// items with an informer of its own.
	Namespaces []string
	// Hooks are further extension hooks (the continuous-reconcile hook is always registered).
	Hooks extension.ReconcileExtensionHooks
}

// AddToManager registers the manifest deployer controller with mgr.
func AddToManager(mgr ctrl.Manager, opts Options) error {
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	hooks := extension.ReconcileExtensionHooks{}.RegisterHookSetup(ContinuousReconcileHook)
	for ht, fns := range opts.Hooks {
		for _, fn := range fns {
			hooks.RegisterHook(fn, ht)
		}
	}
	d := &deployer{
		client:     mgr.GetClient(),
		fieldOwner: opts.Name,
		hooks:      hooks,
		targets:    &targetClients{reader: mgr.GetAPIReader()},
	}
	return lib.AddToManager(mgr, d, lib.Options{
		Type:           Type,
		Name:           opts.Name,
		Identity:       opts.Identity,
		Version:        opts.Version,
		TargetSelector: opts.TargetSelector,
		TargetType:     lsv1alpha1.KubernetesClusterTargetType,
		DefaultTimeout: opts.DefaultTimeout,
		Namespaces:     opts.Namespaces,
	})
}

type deployer struct {
	client     client.Client
	fieldOwner string
	hooks      extension.ReconcileExtensionHooks
	targets    *targetClients
}

func (d *deployer) ExtensionHooks() extension.ReconcileExtensionHooks { return d.hooks }

// waitInterval grows with the time the job has been waiting: 1s, 2s, 4s … 15s.
func waitInterval(di *lsv1alpha1.DeployItem) time.Duration {
	if di.Status.LastReconcileTime == nil {
		return time.Second
	}
	return min(max(time.Since(di.Status.LastReconcileTime.Time)/2, time.Second), 15*time.Second)
}

func (d *deployer) Reconcile(ctx context.Context, req *lib.Request) (lib.Result, error) {
	di := req.Item
	cfg, err := parseConfig(di)
	if err != nil {
		return lib.Result{}, err
	}
	if err := validateReadiness(cfg.spec.ReadinessChecks); err != nil {
		return lib.Result{}, err
	}
	c, err := d.targets.forTarget(ctx, req.Target)
	if err != nil {
		return lib.Result{}, err
	}
	prev := previousResources(di)
	sctx, span := tracing.StartStep(ctx, tracer(), lib.Kind, "ApplyManifests", attribute.Int("terrace.manifests", len(cfg.spec.Manifests)))
	managed, applied, waitingFor, applyErr := d.apply(sctx, c, di, cfg, prev)
	tracing.EndStep(span, applyErr)
	if applyErr != nil || waitingFor != "" {
		// Keep what was applied recorded, with what was managed before and
		// not applied this time (nothing is deleted until a full apply).
		ps, err := providerStatus(cfg.version, merged(prev, managed))
		if err != nil {
			return lib.Result{}, errors.Join(applyErr, err)
		}
		di.Status.ProviderStatus = &runtime.RawExtension{Raw: ps}
	}
	if applyErr != nil {
		return lib.Result{}, applyErr
	}
	if waitingFor != "" {
		if !req.Deadline.IsZero() && time.Now().After(req.Deadline) {
			return lib.Result{}, lib.PermanentError(ReasonUnknownKind, "not served within the timeout: "+waitingFor, lsv1alpha1.ErrorConfigurationProblem, lsv1alpha1.ErrorTimeout)
		}
		return lib.PendingFor(time.Second, waitingFor), nil
	}
	if gone := dropped(prev, managed); len(gone) > 0 {
		sctx, span := tracing.StartStep(ctx, tracer(), lib.Kind, "DeleteManifests", attribute.Int("terrace.objects", len(gone)))
		left, done, delErr := d.deleteResources(sctx, c, di, gone)
		tracing.EndStep(span, delErr)
		// What is not gone yet stays recorded beside what was applied: on a
		// failed or unfinished deletion the next reconcile (or the item's
		// deletion) must still find both.
		ps, err := providerStatus(cfg.version, append(slices.Clone(managed), left...))
		if err != nil {
			return lib.Result{}, errors.Join(delErr, err)
		}
		di.Status.ProviderStatus = &runtime.RawExtension{Raw: ps}
		if delErr != nil {
			return lib.Result{}, delErr
		}
		if !done {
			// An object held by finalizers blocks the next deletion group
			// (e.g. its namespace); nothing tells us when they are removed
			// on the target, so look again, backing off like readiness.
			msg := "waiting for objects dropped from the configuration to be deleted: " + refList(left)
			if !req.Deadline.IsZero() && time.Now().After(req.Deadline) {
				return lib.Result{}, lib.PermanentError(ReasonDeleteFailed, "not done within the timeout: "+msg, lsv1alpha1.ErrorTimeout)
			}
			req.Log.Info("objects that left the configuration are still being deleted", "left", len(left))
			wait := waitInterval(di)
			if !req.Deadline.IsZero() {
				wait = min(wait, max(time.Until(req.Deadline), 100*time.Millisecond))
			}
			return lib.PendingFor(wait, msg), nil
		}
		req.Log.Info("deleted objects that left the configuration", "count", len(gone))
	} else {
		ps, err := providerStatus(cfg.version, managed)
		if err != nil {
			return lib.Result{}, err
		}
		di.Status.ProviderStatus = &runtime.RawExtension{Raw: ps}
	}

	sctx, span = tracing.StartStep(ctx, tracer(), lib.Kind, "CheckReadiness")
	notReady, err := d.checkReadiness(sctx, c, cfg, applied)
	if notReady != "" {
		span.SetAttributes(attribute.String("terrace.not_ready", notReady))
	}
	tracing.EndStep(span, err)
	if err != nil {
		return lib.Result{}, err
	}
	if notReady == "" {
		var data []byte
		data, notReady, err = d.exports(ctx, c, cfg)
		if err != nil {
			return lib.Result{}, err
		}
		switch {
		case notReady == "" && data != nil:
			if err := lib.WriteExport(ctx, d.client, d.fieldOwner, di, data); err != nil {
				return lib.Result{}, err
			}
		case notReady == "":
			if err := lib.ClearExport(ctx, d.client, di); err != nil {
				return lib.Result{}, err
			}
		}
	}
	if notReady != "" {
		deadline := req.Deadline
		if t := cfg.spec.ReadinessChecks.Timeout; t != nil && di.Status.LastReconcileTime != nil {
			deadline = di.Status.LastReconcileTime.Add(t.Duration)
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			return lib.Result{}, lib.PermanentError(ReasonNotReady, "not ready within the timeout: "+notReady, lsv1alpha1.ErrorTimeout)
		}
		wait := waitInterval(di)
		if !deadline.IsZero() {
			wait = min(wait, max(time.Until(deadline), 100*time.Millisecond))
		}
		return lib.PendingFor(wait, notReady), nil
	}
	return lib.Result{Message: fmt.Sprintf("%d objects applied and ready", len(managed))}, nil
}

// refList names the first few resources of rs, for messages.
func refList(rs []manifestv1alpha2.ManagedResourceStatus) string {
	const most = 3
	names := make([]string, 0, most)
	for _, r := range rs[:min(len(rs), most)] {
		names = append(names, refString(r.Resource))
	}
	out := strings.Join(names, ", ")
	if len(rs) > most {
		out += fmt.Sprintf(" and %d more", len(rs)-most)
	}
	return out
}

func (d *deployer) ForceReconcile(ctx context.Context, req *lib.Request) (lib.Result, error) {
	return d.Reconcile(ctx, req)
}

// Abort has nothing to stop: applying is synchronous within a reconcile, and
// what was applied stays (it is removed when the item is deleted).
func (d *deployer) Abort(context.Context, *lib.Request) (lib.Result, error) { return lib.Done(), nil }

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
			wait := waitInterval(di)
			if !req.Deadline.IsZero() {
				wait = min(wait, max(time.Until(req.Deadline), 100*time.Millisecond))
			}
			return lib.PendingFor(wait, "waiting for managed objects to be deleted"), nil
		}
	}
	if err := lib.DeleteExport(ctx, d.client, di); err != nil {
		return lib.Result{}, err
	}
	return lib.Done(), nil
}

// ContinuousReconcileHook re-applies a Succeeded item every
// spec.config.continuousReconcile.every (v1alpha2), against drift on the
// target. It is a ShouldReconcile hook: it forces a reconcile when the
// interval has passed since lastReconcileTime, and otherwise asks for a
// requeue when it will have.
var ContinuousReconcileHook = extension.ReconcileExtensionHookSetup{
	HookTypes: []extension.HookType{extension.ShouldReconcileHook},
	Hook: func(_ context.Context, log logr.Logger, di *lsv1alpha1.DeployItem, _ *lsv1alpha1.Target, _ extension.HookType) (*extension.HookResult, error) {
		if di == nil || di.DeletionTimestamp != nil || di.Status.Phase != lsv1alpha1.PhaseSucceeded || di.Status.LastReconcileTime == nil {
			return nil, nil
		}
		cfg, err := parseConfig(di)
		if err != nil || cfg.spec.ContinuousReconcile == nil || cfg.spec.ContinuousReconcile.Every == nil {
			// A bad configuration is reported by Reconcile, not by the hook.
			return nil, nil
		}
		every := cfg.spec.ContinuousReconcile.Every.Duration
		next := di.Status.LastReconcileTime.Add(every)
		if left := time.Until(next); left > 0 {
			return extension.RequeueAfter(left, true), nil
		}
		log.V(1).Info("continuous reconcile: re-applying", "every", every)
		return extension.RequeueAfter(every, false), nil
	},
}

// TracerName names the manifest deployer's tracer. Its spans are children of
// the library's "DeployItem.Apply" / "DeployItem.Delete":
// "DeployItem.ApplyManifests", "DeployItem.DeleteManifests",
// "DeployItem.CheckReadiness".
const TracerName = "github.com/terrace-dev/terrace/deployers/manifest"

// tracer is looked up per call, as the global provider may be installed
// after the deployer was built.
func tracer() trace.Tracer { return otel.Tracer(TracerName) }
