package metrics

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// JobClock remembers when this process saw each object's job start, so that
// a job's duration is exact: the times objects record in their status
// (condition transitions, lastReconcileTime) have a resolution of one second,
// and serve only as the fallback after a restart.
type JobClock struct{ m sync.Map }

type jobStart struct {
	job string
	at  time.Time
}

// Start records that job started on the object key at at.
func (c *JobClock) Start(key types.NamespacedName, job string, at time.Time) {
	c.m.Store(key, jobStart{job: job, at: at})
}

// Finish returns how long job ran on key until now and forgets it. When this
// process did not see the job start, it measures from fallback, the start
// the object's status records; without one the duration is negative
// (Recorder.JobFinished then counts the job without observing a duration).
func (c *JobClock) Finish(key types.NamespacedName, job string, fallback time.Time, now time.Time) time.Duration {
	if v, ok := c.m.LoadAndDelete(key); ok {
		if st := v.(jobStart); st.job == job {
			return now.Sub(st.at)
		}
	}
	if fallback.IsZero() {
		return -1
	}
	return now.Sub(fallback)
}

// Forget drops what the clock knows about key (the object is gone).
func (c *JobClock) Forget(key types.NamespacedName) { c.m.Delete(key) }

// MustRegister registers collectors with controller-runtime's registry,
// accepting collectors registered before (reconcilers of the same binary, or
// tests building several, may call it more than once). Any other error is a
// programming error and panics.
func MustRegister(collectors ...prometheus.Collector) {
	for _, c := range collectors {
		if err := ctrlmetrics.Registry.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				panic(err)
			}
		}
	}
}
