package manifest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	manifestv1alpha2 "github.com/terrace-dev/terrace/apis/deployers/manifest/v1alpha2"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// waitInterval grows with the time the job has been waiting: 1s, 2s, 4s … 15s.
func waitInterval(di *lsv1alpha1.DeployItem) time.Duration {
	if di.Status.LastReconcileTime == nil {
		return time.Second
	}
	return min(max(time.Since(di.Status.LastReconcileTime.Time)/2, time.Second), 15*time.Second)
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

// applyJob is the scope of one Reconcile: what its steps found and decided.
type applyJob struct {
	req *lib.Request
	di  *lsv1alpha1.DeployItem
	cfg *config
	c   *clusterClient
	// prev is the item's record from before; managed and applied what this
	// apply wrote (see apply).
	prev    []manifestv1alpha2.ManagedResourceStatus
	managed []manifestv1alpha2.ManagedResourceStatus
	applied []*unstructured.Unstructured
	// notReady names what is not ready yet ("" when all is).
	notReady string
	// result is what Reconcile returns when a step stops the list.
	result lib.Result
}

// Reconcile applies the item's manifests, deletes what left the
// configuration, then waits for readiness and writes the exports.
func (d *deployer) Reconcile(ctx context.Context, req *lib.Request) (lib.Result, error) {
	j := &applyJob{req: req, di: req.Item}
	steps := append([]flow.Step[*applyJob]{d.readConfig, d.connect}, d.applySteps()...)
	return d.run(ctx, j, steps...)
}

// applySteps apply the job's objects, delete what left the configuration,
// check readiness and write the exports.
func (d *deployer) applySteps() []flow.Step[*applyJob] {
	return []flow.Step[*applyJob]{d.applyManifests, d.deleteDropped, d.checkApplied, d.writeExports, d.awaitReadiness}
}

// run runs steps; a finished job's message counts what the job manages.
func (d *deployer) run(ctx context.Context, j *applyJob, steps ...flow.Step[*applyJob]) (lib.Result, error) {
	out, err := flow.Run(ctx, j, steps...)
	if err != nil {
		return lib.Result{}, err
	}
	if out.Stopped() {
		return j.result, nil
	}
	return lib.Result{Message: fmt.Sprintf("%d objects applied and ready", len(j.managed))}, nil
}

// readConfig parses spec.config and checks the readiness checks' shape
// before anything is applied.
func (d *deployer) readConfig(_ context.Context, j *applyJob) (flow.Result, error) {
	cfg, err := parseConfig(j.di)
	if err != nil {
		return flow.Stop(), err
	}
	if err := validateReadiness(cfg.spec.ReadinessChecks); err != nil {
		return flow.Stop(), err
	}
	if err := validateDeletionGroups("spec.config.deletionGroups", cfg.spec.DeletionGroups); err != nil {
		return flow.Stop(), err
	}
	if err := validateDeletionGroups("spec.config.deletionGroupsDuringUpdate", cfg.spec.DeletionGroupsDuringUpdate); err != nil {
		return flow.Stop(), err
	}
	if err := checkContinuousInterval(cfg, d.minEvery); err != nil {
		return flow.Stop(), err
	}
	j.cfg = cfg
	return flow.Continue(), nil
}

// connect gets the client of the Target's cluster.
func (d *deployer) connect(ctx context.Context, j *applyJob) (flow.Result, error) {
	c, err := d.targets.forTarget(ctx, j.req.Target)
	if err != nil {
		return flow.Stop(), err
	}
	j.c, j.prev = c, previousResources(j.di)
	return flow.Continue(), nil
}

// applyManifests applies the manifests (span "DeployItem.ApplyManifests").
// After an error, or while kinds are not served yet, what was applied is
// recorded with what was managed before and not applied this time: nothing
// is deleted until a full apply.
func (d *deployer) applyManifests(ctx context.Context, j *applyJob) (flow.Result, error) {
	sctx, span := tracing.StartStep(ctx, tracer(), lib.Kind, "ApplyManifests", attribute.Int("terrace.manifests", len(j.cfg.spec.Manifests)))
	managed, applied, waitingFor, applyErr := d.apply(sctx, j.c, j.di, j.cfg, j.prev, j.req.Deadline)
	tracing.EndStep(span, applyErr)
	j.managed, j.applied = managed, applied
	if applyErr == nil && waitingFor == "" {
		return flow.Continue(), nil
	}
	if err := j.record(merged(j.prev, managed)); err != nil {
		return flow.Stop(), errors.Join(applyErr, err)
	}
	if applyErr != nil {
		return flow.Stop(), applyErr
	}
	if pastDeadline(j.req.Deadline) {
		return flow.Stop(), lib.PermanentError(ReasonUnknownKind, "not served within the timeout: "+waitingFor, lsv1alpha1.ErrorConfigurationProblem, lsv1alpha1.ErrorTimeout)
	}
	j.result = lib.PendingFor(time.Second, waitingFor)
	return flow.Stop(), nil
}

// deleteDropped deletes the objects that left the configuration (span
// "DeployItem.DeleteManifests"). What is not gone yet stays recorded beside
// what was applied: on a failed or unfinished deletion the next reconcile
// (or the item's deletion) must still find both.
func (d *deployer) deleteDropped(ctx context.Context, j *applyJob) (flow.Result, error) {
	gone := dropped(j.prev, j.managed)
	if len(gone) == 0 {
		return flow.Continue(), j.record(j.managed)
	}
	sctx, span := tracing.StartStep(ctx, tracer(), lib.Kind, "DeleteManifests", attribute.Int("terrace.objects", len(gone)))
	left, done, delErr := d.deleteResources(sctx, j.c, j.di, gone, j.cfg.spec.DeletionGroupsDuringUpdate)
	tracing.EndStep(span, delErr)
	if err := j.record(append(slices.Clone(j.managed), left...)); err != nil {
		return flow.Stop(), errors.Join(delErr, err)
	}
	if delErr != nil {
		return flow.Stop(), delErr
	}
	if !done {
		// An object held by finalizers blocks the next deletion group
		// (e.g. its namespace); nothing tells us when they are removed
		// on the target, so look again, backing off like readiness.
		msg := "waiting for objects dropped from the configuration to be deleted: " + refList(left)
		if pastDeadline(j.req.Deadline) {
			return flow.Stop(), lib.PermanentError(ReasonDeleteFailed, "not done within the timeout: "+msg, lsv1alpha1.ErrorTimeout)
		}
		j.req.Log.Info("objects that left the configuration are still being deleted", "left", len(left))
		j.result = lib.PendingFor(waitUntil(waitInterval(j.di), j.req.Deadline), msg)
		return flow.Stop(), nil
	}
	j.req.Log.Info("deleted objects that left the configuration", "count", len(gone))
	return flow.Continue(), nil
}

// checkApplied checks the readiness of the applied objects (span
// "DeployItem.CheckReadiness").
func (d *deployer) checkApplied(ctx context.Context, j *applyJob) (flow.Result, error) {
	sctx, span := tracing.StartStep(ctx, tracer(), lib.Kind, "CheckReadiness")
	notReady, err := d.checkReadiness(sctx, j.c, j.cfg, j.applied)
	if notReady != "" {
		span.SetAttributes(attribute.String("terrace.not_ready", notReady))
	}
	tracing.EndStep(span, err)
	if err != nil {
		return flow.Stop(), err
	}
	j.notReady = notReady
	return flow.Continue(), nil
}

// writeExports writes the export Secret once everything is ready (or
// clears it when nothing is exported); an export not there yet counts as
// not ready.
func (d *deployer) writeExports(ctx context.Context, j *applyJob) (flow.Result, error) {
	if j.notReady != "" {
		return flow.Continue(), nil
	}
	data, notReady, err := d.exports(ctx, j.c, j.cfg)
	if err != nil {
		return flow.Stop(), err
	}
	j.notReady = notReady
	switch {
	case notReady == "" && data != nil:
		err = lib.WriteExport(ctx, d.client, d.fieldOwner, j.di, data)
	case notReady == "":
		err = lib.ClearExport(ctx, d.client, j.di)
	}
	if err != nil {
		return flow.Stop(), err
	}
	return flow.Continue(), nil
}

// awaitReadiness keeps the job pending while something is not ready, until
// the readiness timeout (readinessChecks.timeout, else the item's).
func (d *deployer) awaitReadiness(_ context.Context, j *applyJob) (flow.Result, error) {
	if j.notReady == "" {
		return flow.Continue(), nil
	}
	deadline := j.req.Deadline
	if t := j.cfg.spec.ReadinessChecks.Timeout; t != nil && j.di.Status.LastReconcileTime != nil {
		deadline = j.di.Status.LastReconcileTime.Add(t.Duration)
	}
	if pastDeadline(deadline) {
		return flow.Stop(), lib.PermanentError(ReasonNotReady, "not ready within the timeout: "+j.notReady, lsv1alpha1.ErrorTimeout)
	}
	j.result = lib.PendingFor(waitUntil(waitInterval(j.di), deadline), j.notReady)
	return flow.Stop(), nil
}

// record writes the managed resources into status.providerStatus, in the
// configuration's apiVersion.
func (j *applyJob) record(managed []manifestv1alpha2.ManagedResourceStatus) error {
	render := j.cfg.status
	if render == nil {
		render = func(m []manifestv1alpha2.ManagedResourceStatus) ([]byte, error) {
			return providerStatus(j.cfg.version, m)
		}
	}
	ps, err := render(managed)
	if err != nil {
		return err
	}
	j.di.Status.ProviderStatus = &runtime.RawExtension{Raw: ps}
	return nil
}

// pastDeadline reports whether a deadline (zero: none) has passed.
func pastDeadline(deadline time.Time) bool {
	return !deadline.IsZero() && time.Now().After(deadline)
}

// waitUntil is wait, but no later than the deadline (zero: none).
func waitUntil(wait time.Duration, deadline time.Time) time.Duration {
	if deadline.IsZero() {
		return wait
	}
	return min(wait, max(time.Until(deadline), 100*time.Millisecond))
}
