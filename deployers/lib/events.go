package lib

import (
	"context"

	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/terrace-dev/terrace/kit/tracing"
)

// event emits an event on the item once the reconcile's writes succeeded;
// its note is cut to MaxEventNote.
func (r *Reconciler) event(s *scope, eventType, reason, format string, args ...any) {
	obj, note := s.orig, eventNote(format, args...)
	s.reports = append(s.reports, func() {
		r.recorder.Eventf(obj, nil, eventType, reason, reason, "%s", note)
	})
}

// report runs the queued events and metrics, last, once the writes they
// describe are done; after a failed write, none.
func (s *scope) report() {
	if s.discard {
		return
	}
	for _, f := range s.reports {
		f()
	}
}

// startSpan starts the reconcile's span "DeployItem.Reconcile". It continues
// the trace of the job that handed the item over (the execution controller
// writes its span context into the item), so one job is one trace across
// binaries; a job the deployer starts itself is a trace of its own, and so
// is a reconcile outside any job (a periodic re-apply, a resync): else a
// long-lived item's trace would grow for ever. A no-op while tracing is off.
func (r *Reconciler) startSpan(ctx context.Context, s *scope) (context.Context, trace.Span) {
	item := s.orig
	var traced client.Object = item
	job := item.Status.JobID
	switch {
	case decideStart(item).own:
		traced = &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: item.Namespace, Name: item.Name}}
	case !inAJob(item):
		// Not part of the last job either: no job ID on its span.
		traced, job = &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: item.Namespace, Name: item.Name}}, ""
	}
	ctx, span := tracing.StartReconcile(ctx, tracer(), Kind, traced, job, AttrDeployer.String(r.opts.Name))
	s.log = logf.FromContext(ctx)
	return ctx, span
}
