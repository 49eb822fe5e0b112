// Package cron reads a standard five-field crontab schedule (minute, hour,
// day of month, month, day of week) and finds its next time, in UTC. It is
// the one reading of a schedule that every Terrace component shares, so
// that a schedule means the same to an installation and to a deploy item.
//
// Each field is "*" (or "?"), a value, a range a-b, or a comma-separated list
// of these, each with an optional step "/n" ("n/step" runs from n to the
// field's maximum). Months and days of the week also take their English
// three-letter names (jan, mon; any case); day of week 7 is Sunday as 0 is.
// When both day fields are restricted, a day matching either one counts; a
// day field with an item that starts with "*" or "?" ("*/2" too) is not
// restricted, as in the scheduler Landscaper uses.
package cron

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// HorizonYears bounds the search for the next time: a schedule such as
// "0 0 30 2 *" (February 30th) never matches.
const HorizonYears = 5

// Schedule is a parsed five-field schedule.
type Schedule struct {
	minute, hour, dom, month, dow uint64 // bit i set: value i matches
	// domAny and dowAny: the field has an item starting with "*" or "?"; a
	// restricted day field alone
	// decides, and two restricted ones match a day either one matches.
	domAny, dowAny bool
}

// field describes one of the five fields: its bounds and the names it takes.
type field struct {
	name     string
	min, max int
	names    []string // names[i] stands for min+i
}

var fields = [5]field{
	{name: "minute", min: 0, max: 59},
	{name: "hour", min: 0, max: 23},
	{name: "day of month", min: 1, max: 31},
	{name: "month", min: 1, max: 12, names: []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}},
	{name: "day of week", min: 0, max: 7, names: []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}},
}

// Parse reads a five-field schedule. Its errors name the field and the
// value that is wrong; the caller names the setting and quotes the spec.
func Parse(spec string) (*Schedule, error) {
	parts := strings.Fields(spec)
	if len(parts) != len(fields) {
		return nil, fmt.Errorf("needs 5 fields (minute hour day-of-month month day-of-week), has %d", len(parts))
	}
	var bits [5]uint64
	for i, p := range parts {
		b, err := fields[i].parse(p)
		if err != nil {
			return nil, fmt.Errorf("%s field %q: %w", fields[i].name, p, err)
		}
		bits[i] = b
	}
	if bits[4]&(1<<7) != 0 { // 7 is Sunday too
		bits[4] |= 1
	}
	return &Schedule{minute: bits[0], hour: bits[1], dom: bits[2], month: bits[3], dow: bits[4],
		domAny: unrestricted(parts[2]), dowAny: unrestricted(parts[4])}, nil
}

// unrestricted reports whether an item of the field starts with "*" or "?".
func unrestricted(s string) bool {
	for item := range strings.SplitSeq(s, ",") {
		if rng, _, _ := strings.Cut(item, "/"); rng == "*" || rng == "?" {
			return true
		}
	}
	return false
}

// parse reads a comma-separated list of "*", "?", "n", "a-b", each with an
// optional "/step".
func (f field) parse(s string) (uint64, error) {
	var bits uint64
	for item := range strings.SplitSeq(s, ",") {
		rng, stepText, hasStep := strings.Cut(item, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepText)
			if err != nil || n < 1 {
				return 0, fmt.Errorf("step %q is not a positive number", stepText)
			}
			step = n
		}
		lo, hi, err := f.bounds(rng, hasStep)
		if err != nil {
			return 0, err
		}
		for v := lo; v <= hi; v += step {
			bits |= 1 << uint(v)
		}
	}
	return bits, nil
}

// bounds reads "*", "?", "n" or "a-b"; a stepped "n" runs from n to the
// maximum.
func (f field) bounds(rng string, stepped bool) (int, int, error) {
	if rng == "*" || rng == "?" {
		return f.min, f.max, nil
	}
	loText, hiText, isRange := strings.Cut(rng, "-")
	lo, err := f.value(loText)
	if err != nil {
		return 0, 0, err
	}
	hi := lo
	switch {
	case isRange:
		if hi, err = f.value(hiText); err != nil {
			return 0, 0, err
		}
		if hi < lo {
			return 0, 0, fmt.Errorf("range %q runs backwards", rng)
		}
	case stepped:
		hi = f.max
	}
	return lo, hi, nil
}

// value reads a number within the field's bounds, or one of its names.
func (f field) value(s string) (int, error) {
	for i, n := range f.names {
		if strings.EqualFold(s, n) {
			return f.min + i, nil
		}
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < f.min || v > f.max {
		return 0, fmt.Errorf("%q is not a value from %d to %d", s, f.min, f.max)
	}
	return v, nil
}

// Next is the first minute strictly after t that the schedule matches, in
// UTC; the zero time when none comes within HorizonYears.
func (s *Schedule) Next(t time.Time) time.Time {
	t = t.UTC().Truncate(time.Minute).Add(time.Minute)
	for end := t.AddDate(HorizonYears, 0, 0); t.Before(end); {
		switch {
		case s.month&(1<<uint(t.Month())) == 0:
			t = time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		case !s.dayMatches(t):
			t = time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, time.UTC)
		case s.hour&(1<<uint(t.Hour())) == 0:
			t = t.Truncate(time.Hour).Add(time.Hour)
		case s.minute&(1<<uint(t.Minute())) == 0:
			t = t.Add(time.Minute)
		default:
			return t
		}
	}
	return time.Time{}
}

func (s *Schedule) dayMatches(t time.Time) bool {
	dom := s.dom&(1<<uint(t.Day())) != 0
	dow := s.dow&(1<<uint(t.Weekday())) != 0
	if s.domAny || s.dowAny {
		return dom && dow
	}
	return dom || dow
}
