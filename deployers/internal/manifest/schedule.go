package manifest

import (
	"time"

	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/kit/cron"
)

// Schedule says when an item is reconciled again after a reconcile at t
// (the zero time: never).
type Schedule interface {
	Next(t time.Time) time.Time
}

// Every is a fixed interval.
type Every time.Duration

// Next is t plus the interval.
func (e Every) Next(t time.Time) time.Time { return t.Add(time.Duration(e)) }

// CronSchedule reads spec.config.continuousReconcile.cron, a five-field
// schedule in UTC (kit/cron); one that does not parse is a configuration
// error naming the setting, the schedule and its wrong field. The helm and
// mock deployers share it.
func CronSchedule(spec string) (Schedule, error) {
	s, err := cron.Parse(spec)
	if err != nil {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "spec.config.continuousReconcile.cron: %q: %v", spec, err)
	}
	return s, nil
}
