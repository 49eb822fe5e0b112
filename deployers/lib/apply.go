package lib

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib/extension"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/timeout"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// runReconcile calls the deployer's Reconcile (or ForceReconcile, after the
// BeforeForceReconcile hooks) and maps the outcome to the phase.
func (r *Reconciler) runReconcile(ctx context.Context, s *scope, before extension.HookType) (flow.Result, error) {
	if stop, err := r.runHooks(ctx, s, before); err != nil || stop {
		return flow.Stop(), err
	}
	di := s.item
	operation, forced := OperationReconcile, s.forced
	if before == extension.BeforeForceReconcileHook {
		operation, forced = OperationForceReconcile, false
		s.removeAnnotations = append(s.removeAnnotations, lsv1alpha1.OperationAnnotation)
	}
	if forced {
		// A hook-forced re-apply of a finished item: a fresh reconcile time,
		// the same job.
		now := metav1.NewTime(r.now())
		di.Status.LastReconcileTime = &now
	}
	// The deployer always works on the current spec.
	di.Status.ObservedGeneration = di.Generation
	if di.Status.Deployer == nil || di.Status.Deployer.Identity != r.opts.Identity {
		di.Status.Deployer = &lsv1alpha1.DeployerInformation{Name: r.opts.Name, Identity: r.opts.Identity, Version: r.opts.Version}
	}
	var (
		res Result
		err = s.targetErr
	)
	if err == nil {
		res, err = r.callApply(ctx, s, operation, forced)
	}
	r.outcome(s, operation, lsv1alpha1.PhaseProgressing, ReasonReconcileFailed, res, err)
	return flow.Continue(), nil
}

// callApply calls Reconcile or ForceReconcile in a span of its own,
// "DeployItem.Apply".
func (r *Reconciler) callApply(ctx context.Context, s *scope, operation string, forced bool) (Result, error) {
	req := r.request(s, forced)
	actx, span := tracing.StartStep(ctx, tracer(), Kind, "Apply", AttrDeployer.String(r.opts.Name), attribute.String("terrace.operation", operation))
	var (
		res Result
		err error
	)
	if operation == OperationForceReconcile {
		res, err = r.call(actx, func(ctx context.Context) (Result, error) { return r.deployer.ForceReconcile(ctx, req) })
	} else {
		res, err = r.call(actx, func(ctx context.Context) (Result, error) { return r.deployer.Reconcile(ctx, req) })
	}
	if res.Pending {
		span.SetAttributes(attribute.Bool("terrace.pending", true))
	}
	tracing.EndStep(span, err)
	return res, err
}

func (r *Reconciler) request(s *scope, forced bool) *Request {
	return &Request{Item: s.item, Target: s.target, Deadline: r.deadline(s.item), Forced: forced, Log: s.log}
}

// deadline is lastReconcileTime + the item's timeout: spec.timeout, else
// the deployer's default (zero time: none).
func (r *Reconciler) deadline(di *lsv1alpha1.DeployItem) time.Time {
	t := r.opts.DefaultTimeout
	if di.Spec.Timeout != nil {
		// The schema admits only durations and "none"; a value Parse
		// refuses (zero) falls back to the default, as the execution
		// controller's progressing timeout does.
		if v, err := timeout.Parse(string(*di.Spec.Timeout)); err == nil {
			t = v
		}
	}
	if t.Disabled {
		return time.Time{}
	}
	start := r.now()
	if di.Status.LastReconcileTime != nil {
		start = di.Status.LastReconcileTime.Time
	}
	return start.Add(t.Duration)
}
