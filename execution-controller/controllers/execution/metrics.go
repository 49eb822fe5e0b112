package execution

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// jobDuration is the time from a job's start (the Progressing condition
// turning True) to its end, by result (Succeeded, Failed, DeleteFailed, Deleted).
var jobDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Namespace: "terrace",
	Subsystem: "execution",
	Name:      "job_duration_seconds",
	Help:      "Duration of execution jobs from start to a final phase, by result.",
	Buckets:   prometheus.ExponentialBuckets(0.5, 2, 14), // 0.5s … ~68m
}, []string{"result"})

var registerOnce sync.Once

func registerMetrics() {
	registerOnce.Do(func() {
		if err := metrics.Registry.Register(jobDuration); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				panic(err)
			}
		}
	})
}

func observeJob[P ~string](result P, d time.Duration) {
	jobDuration.WithLabelValues(string(result)).Observe(d.Seconds())
}
