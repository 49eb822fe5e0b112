package installation

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// cronSchedule is a standard five-field crontab schedule (minute, hour,
// day of month, month, day of week), read in UTC.
type cronSchedule struct {
	minute, hour, dom, month, dow uint64 // bit i set: value i matches
	// domAny and dowAny: the field was "*"; when both day fields are
	// restricted, a day matching either one matches (as cron does).
	domAny, dowAny bool
}

// cronField describes one field: its bounds and the names it accepts.
type cronField struct {
	name     string
	min, max int
	names    []string // names[i] stands for min+i
}

var cronFields = [5]cronField{
	{name: "minute", min: 0, max: 59},
	{name: "hour", min: 0, max: 23},
	{name: "day of month", min: 1, max: 31},
	{name: "month", min: 1, max: 12, names: []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}},
	{name: "day of week", min: 0, max: 7, names: []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}},
}

// parseCron reads a five-field schedule; its errors name the field.
func parseCron(spec string) (cronSchedule, error) {
	parts := strings.Fields(spec)
	if len(parts) != 5 {
		return cronSchedule{}, fmt.Errorf("needs 5 fields (minute hour day-of-month month day-of-week), has %d", len(parts))
	}
	var bits [5]uint64
	for i, p := range parts {
		b, err := cronFields[i].parse(p)
		if err != nil {
			return cronSchedule{}, fmt.Errorf("%s field %q: %w", cronFields[i].name, p, err)
		}
		bits[i] = b
	}
	if bits[4]&(1<<7) != 0 { // 7 is Sunday too
		bits[4] |= 1
	}
	return cronSchedule{minute: bits[0], hour: bits[1], dom: bits[2], month: bits[3], dow: bits[4],
		domAny: parts[2] == "*", dowAny: parts[4] == "*"}, nil
}

// parse reads a comma-separated list of "*", "n", "a-b", each with an
// optional "/step".
func (f cronField) parse(s string) (uint64, error) {
	var bits uint64
	for _, item := range strings.Split(s, ",") {
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

// bounds reads "*", "n" or "a-b"; "n/step" runs from n to the maximum.
func (f cronField) bounds(rng string, stepped bool) (int, int, error) {
	if rng == "*" {
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

func (f cronField) value(s string) (int, error) {
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

// cronHorizon bounds the search for the next matching time: a schedule
// such as "0 0 30 2 *" never matches.
const cronHorizon = 5 * 366 * 24 * time.Hour

// next returns the first minute after t that the schedule matches, in UTC,
// and false when none comes within cronHorizon.
func (c cronSchedule) next(t time.Time) (time.Time, bool) {
	t = t.UTC().Truncate(time.Minute).Add(time.Minute)
	end := t.Add(cronHorizon)
	for t.Before(end) {
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
			return t, true
		}
	}
	return time.Time{}, false
}

func (c cronSchedule) dayMatches(t time.Time) bool {
	dom := c.dom&(1<<uint(t.Day())) != 0
	dow := c.dow&(1<<uint(t.Weekday())) != 0
	if c.domAny || c.dowAny {
		return dom && dow
	}
	return dom || dow
}
