package manifest

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Schedule says when an item is reconciled again after a reconcile at t.
type Schedule interface {
	Next(t time.Time) time.Time
}

// Every is a fixed interval.
type Every time.Duration

// Next is t plus the interval.
func (e Every) Next(t time.Time) time.Time { return t.Add(time.Duration(e)) }

// Cron is a crontab schedule of five fields (minute, hour, day of month,
// month, day of week), in UTC. Each field is *, a number, a range a-b, a
// list, each optionally with a step /n. As in cron, when both the day of
// month and the day of week are restricted, a day matching either counts.
type Cron struct {
	minute, hour, dom, month, dow uint64
	domAny, dowAny                bool
}

// cronFields are the bounds of the five fields.
var cronFields = [5]struct {
	name     string
	min, max int
}{{"minute", 0, 59}, {"hour", 0, 23}, {"day of month", 1, 31}, {"month", 1, 12}, {"day of week", 0, 7}}

// ParseCron parses a five-field crontab schedule.
func ParseCron(spec string) (*Cron, error) {
	fields := strings.Fields(spec)
	if len(fields) != 5 {
		return nil, fmt.Errorf("%q has %d fields; a schedule has five: minute hour day-of-month month day-of-week", spec, len(fields))
	}
	var sets [5]uint64
	for i, f := range fields {
		set, err := parseCronField(f, cronFields[i].min, cronFields[i].max)
		if err != nil {
			return nil, fmt.Errorf("%s field %q: %w", cronFields[i].name, f, err)
		}
		sets[i] = set
	}
	if sets[4]&(1<<7) != 0 { // 7 is Sunday too
		sets[4] |= 1
	}
	return &Cron{minute: sets[0], hour: sets[1], dom: sets[2], month: sets[3], dow: sets[4],
		domAny: fields[2] == "*", dowAny: fields[4] == "*"}, nil
}

func parseCronField(f string, lo, hi int) (uint64, error) {
	var set uint64
	for part := range strings.SplitSeq(f, ",") {
		rng, stepText, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepText)
			if err != nil || n <= 0 {
				return 0, fmt.Errorf("step %q is not a positive number", stepText)
			}
			step = n
		}
		from, to := lo, hi
		if rng != "*" {
			a, b, isRange := strings.Cut(rng, "-")
			var err error
			if from, err = cronNumber(a, lo, hi); err != nil {
				return 0, err
			}
			to = from
			if isRange {
				if to, err = cronNumber(b, lo, hi); err != nil {
					return 0, err
				}
			} else if hasStep {
				to = hi
			}
			if to < from {
				return 0, fmt.Errorf("range %s ends before it starts", rng)
			}
		}
		for v := from; v <= to; v += step {
			set |= 1 << v
		}
	}
	return set, nil
}

func cronNumber(s string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%q is not a number from %d to %d", s, lo, hi)
	}
	return n, nil
}

// Next is the first minute after t the schedule matches (the zero time
// when none within five years, e.g. February 30th).
func (c *Cron) Next(t time.Time) time.Time {
	t = t.UTC().Truncate(time.Minute).Add(time.Minute)
	for end := t.AddDate(5, 0, 0); t.Before(end); {
		switch {
		case c.month&(1<<uint(t.Month())) == 0:
			t = time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		case !c.dayMatches(t):
			t = time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, time.UTC)
		case c.hour&(1<<uint(t.Hour())) == 0:
			t = t.Truncate(time.Hour).Add(time.Hour)
		case c.minute&(1<<uint(t.Minute())) == 0:
			t = t.Add(time.Minute)
		default:
			return t
		}
	}
	return time.Time{}
}

func (c *Cron) dayMatches(t time.Time) bool {
	dom := c.dom&(1<<uint(t.Day())) != 0
	dow := c.dow&(1<<uint(t.Weekday())) != 0
	switch {
	case c.domAny && c.dowAny:
		return true
	case c.domAny:
		return dow
	case c.dowAny:
		return dom
	}
	return dom || dow
}
