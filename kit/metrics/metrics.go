// Package metrics holds the Prometheus metrics every Terrace controller
// shares, registered with controller-runtime's registry so they are served on
// each binary's /metrics beside controller-runtime's own.
//
// Label values are bounded: kind is a fixed set of API kinds, phase and result
// are the API's phase enums. The only per-object series is
// terrace_object_phase; its series are deleted when the object goes
// (Recorder.Forget), as Flux does for its per-object gauges, so a long-running
// controller does not accumulate series of deleted objects.
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Label names.
const (
	LabelKind      = "kind"
	LabelResult    = "result"
	LabelPhase     = "phase"
	LabelNamespace = "namespace"
	LabelName      = "name"
)

var (
	jobsStarted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "terrace_jobs_started_total",
		Help: "Jobs started, by object kind.",
	}, []string{LabelKind})
	jobsFinished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "terrace_jobs_finished_total",
		Help: "Jobs finished, by object kind and final phase.",
	}, []string{LabelKind, LabelResult})
	jobDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "terrace_job_duration_seconds",
		Help:    "Time from a job's start to its final phase, by object kind and final phase.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 18), // 5ms … ~22m
	}, []string{LabelKind, LabelResult})
	phaseTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "terrace_phase_transitions_total",
		Help: "Phase transitions, by object kind and the phase entered.",
	}, []string{LabelKind, LabelPhase})
	objectPhase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "terrace_object_phase",
		Help: "1 for the current phase of each object; the series goes when the object goes.",
	}, []string{LabelKind, LabelNamespace, LabelName, LabelPhase})
)

var registerOnce sync.Once

// Register registers the shared metrics with controller-runtime's registry.
// It is idempotent, so every reconciler's setup may call it.
func Register() {
	registerOnce.Do(func() {
		MustRegister(jobsStarted, jobsFinished, jobDuration, phaseTransitions, objectPhase)
	})
}

// Recorder records the metrics of one kind of object.
type Recorder struct {
	Kind string
}

// ResultSucceeded and ResultFailed are the results of most finished jobs,
// whose counter series For creates at zero.
const (
	ResultSucceeded = "Succeeded"
	ResultFailed    = "Failed"
)

// For returns a Recorder for kind and registers the metrics. It creates the
// job counters of kind at zero (started; finished Succeeded and Failed): a
// counter series that appears only with its first increment hides that
// increment from rate() and increase(), and a freshly (re)started
// controller would show no series at all, say one that only finishes jobs
// it resumed (a restart mid-job counts the finish, not the start: the
// counters are per process).
func For(kind string) Recorder {
	Register()
	jobsStarted.WithLabelValues(kind)
	jobsFinished.WithLabelValues(kind, ResultSucceeded)
	jobsFinished.WithLabelValues(kind, ResultFailed)
	return Recorder{Kind: kind}
}

// JobStarted counts a job started on an object of the recorder's kind.
func (r Recorder) JobStarted() {
	jobsStarted.WithLabelValues(r.Kind).Inc()
}

// JobFinished counts a job that ended in result and observes its duration.
// A negative duration (no known start) is counted but not observed.
func (r Recorder) JobFinished(result string, d time.Duration) {
	jobsFinished.WithLabelValues(r.Kind, result).Inc()
	if d >= 0 {
		jobDuration.WithLabelValues(r.Kind, result).Observe(d.Seconds())
	}
}

// Phase records that the object namespace/name is in phase. When the phase
// differs from the one recorded before, it counts a transition. Calling it on
// every reconcile is cheap and keeps the per-object gauge correct after a
// controller restart.
func (r Recorder) Phase(namespace, name, phase string) {
	if phase == "" {
		return
	}
	k := objectKey{kind: r.Kind, namespace: namespace, name: name}
	if prev, ok := lastPhase.Load(k); ok {
		if prev.(string) == phase {
			return
		}
		// The exact series of the previous phase: a partial-match delete
		// would scan every object's series, on every transition.
		objectPhase.DeleteLabelValues(r.Kind, namespace, name, prev.(string))
	}
	objectPhase.WithLabelValues(r.Kind, namespace, name, phase).Set(1)
	lastPhase.Store(k, phase)
	phaseTransitions.WithLabelValues(r.Kind, phase).Inc()
}

// objectKey names an object in lastPhase.
type objectKey struct{ kind, namespace, name string }

// lastPhase holds the phase each object's gauge series shows (the process's
// own record: the series are this process's too).
var lastPhase sync.Map

// Forget deletes the object's per-object series; call it when the object is
// gone (deleted, or its finalizer removed).
func (r Recorder) Forget(namespace, name string) {
	if prev, ok := lastPhase.LoadAndDelete(objectKey{kind: r.Kind, namespace: namespace, name: name}); ok {
		objectPhase.DeleteLabelValues(r.Kind, namespace, name, prev.(string))
	}
}
