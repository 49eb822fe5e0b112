package cron

import (
	"testing"
	"time"
)

func at(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestNext: each form of a field, the two day fields together, and the
// turns of hour, day, month and year, from times in UTC.
func TestNext(t *testing.T) {
	for _, tc := range []struct{ spec, from, want string }{
		{"* * * * *", "2026-01-01T08:07:30Z", "2026-01-01T08:08:00Z"},
		{"* * * * *", "2026-01-01T08:07:00Z", "2026-01-01T08:08:00Z"}, // strictly after
		{"0 * * * *", "2026-01-01T08:07:30Z", "2026-01-01T09:00:00Z"},
		{"*/15 * * * *", "2026-01-01T08:07:30Z", "2026-01-01T08:15:00Z"},
		{"*/15 * * * *", "2026-01-01T08:50:00Z", "2026-01-01T09:00:00Z"},
		{"30 2 * * *", "2026-01-01T08:07:30Z", "2026-01-02T02:30:00Z"},
		{"5,10-12 8 * * *", "2026-01-01T08:07:30Z", "2026-01-01T08:10:00Z"},
		{"5,10 1-2 * * *", "2026-03-01T01:06:00Z", "2026-03-01T01:10:00Z"},
		{"10/20 * * * *", "2026-01-01T08:31:00Z", "2026-01-01T08:50:00Z"}, // n/step runs to the maximum
		{"0 1-10/4 * * *", "2026-01-01T06:00:00Z", "2026-01-01T09:00:00Z"},
		{"0 0 1 */3 *", "2026-03-01T10:00:00Z", "2026-04-01T00:00:00Z"},
		{"0 0 1 1 *", "2026-03-01T10:00:00Z", "2027-01-01T00:00:00Z"},
		{"0 0 29 2 *", "2026-01-01T08:07:30Z", "2028-02-29T00:00:00Z"},
		// Days of the week; 2026-01-01 is a Thursday.
		{"0 9 * * 1-5", "2026-02-27T10:00:00Z", "2026-03-02T09:00:00Z"}, // Friday → Monday
		{"0 0 * * 0", "2026-01-01T08:07:30Z", "2026-01-04T00:00:00Z"},
		{"0 0 * * 7", "2026-01-01T08:07:30Z", "2026-01-04T00:00:00Z"}, // 7 is Sunday
		// A day field starting with "*" or "?" leaves the other one alone to decide.
		{"0 0 */1 * mon", "2026-01-01T08:07:30Z", "2026-01-05T00:00:00Z"},
		{"0 0 ? * mon", "2026-01-01T08:07:30Z", "2026-01-05T00:00:00Z"},
		{"0 0 1 * ?", "2026-01-01T08:07:30Z", "2026-02-01T00:00:00Z"},
		{"0 0 1,*/10 * mon", "2026-01-01T08:07:30Z", "2026-05-11T00:00:00Z"}, // both: a Monday that is the 1st, 11th, 21st or 31st
		// Names, in any case, also in ranges, lists and with steps.
		{"0 0 * * mon", "2026-01-01T08:07:30Z", "2026-01-05T00:00:00Z"},
		{"0 0 * * SAT,sun", "2026-01-01T08:07:30Z", "2026-01-03T00:00:00Z"},
		{"0 9 * * Mon-Fri", "2026-02-27T10:00:00Z", "2026-03-02T09:00:00Z"},
		{"0 0 1 feb *", "2026-01-01T08:07:30Z", "2026-02-01T00:00:00Z"},
		{"0 0 1 JUN-aug *", "2026-07-02T00:00:00Z", "2026-08-01T00:00:00Z"},
		{"0 0 1 jan/6 *", "2026-02-01T00:00:00Z", "2026-07-01T00:00:00Z"},
		// Both day fields restricted: a day matching either counts.
		{"0 0 3 * fri", "2026-01-01T08:07:30Z", "2026-01-02T00:00:00Z"}, // a Friday before the 3rd
		{"0 0 13 * 5", "2026-03-01T10:00:00Z", "2026-03-06T00:00:00Z"},
		{"0 0 2 * mon", "2026-01-01T08:07:30Z", "2026-01-02T00:00:00Z"}, // the 2nd before a Monday
		// One restricted day field decides alone.
		{"0 0 13 * *", "2026-03-01T10:00:00Z", "2026-03-13T00:00:00Z"},
		{"0 0 * * fri", "2026-03-07T10:00:00Z", "2026-03-13T00:00:00Z"},
	} {
		s, err := Parse(tc.spec)
		if err != nil {
			t.Errorf("%q: %v", tc.spec, err)
			continue
		}
		if got := s.Next(at(t, tc.from)); !got.Equal(at(t, tc.want)) {
			t.Errorf("%q after %s: %s, want %s", tc.spec, tc.from, got.Format(time.RFC3339), tc.want)
		}
	}
}

// TestNextIsUTC: a time in another zone is read as the same instant, and
// the schedule's hours are UTC hours.
func TestNextIsUTC(t *testing.T) {
	s, err := Parse("0 12 * * *")
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 1, 1, 13, 0, 0, 0, time.FixedZone("UTC+3", 3*3600)) // 10:00 UTC
	if got, want := s.Next(from), at(t, "2026-01-01T12:00:00Z"); !got.Equal(want) || got.Location() != time.UTC {
		t.Errorf("next %s, want %s", got, want)
	}
}

// TestNextNever: a schedule that names no day within the horizon has no
// next time.
func TestNextNever(t *testing.T) {
	for _, spec := range []string{"0 0 30 2 *", "0 0 31 4,6,9,11 *"} {
		s, err := Parse(spec)
		if err != nil {
			t.Fatalf("%q: %v", spec, err)
		}
		if got := s.Next(at(t, "2026-01-01T00:00:00Z")); !got.IsZero() {
			t.Errorf("%q matched %s", spec, got)
		}
	}
}

// TestParseErrors: each error names the field and the value that is wrong.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"", "needs 5 fields (minute hour day-of-month month day-of-week), has 0"},
		{"* * *", "needs 5 fields (minute hour day-of-month month day-of-week), has 3"},
		{"* * * foo * *", "needs 5 fields (minute hour day-of-month month day-of-week), has 6"},
		{"60 * * * *", `minute field "60": "60" is not a value from 0 to 59`},
		{"x * * * *", `minute field "x": "x" is not a value from 0 to 59`},
		{"-1 * * * *", `minute field "-1": "" is not a value from 0 to 59`},
		{"* 24 * * *", `hour field "24": "24" is not a value from 0 to 23`},
		{"* * 0 * *", `day of month field "0": "0" is not a value from 1 to 31`},
		{"* * 1,,2 * *", `day of month field "1,,2": "" is not a value from 1 to 31`},
		{"* * * 13 *", `month field "13": "13" is not a value from 1 to 12`},
		{"* * * mon *", `month field "mon": "mon" is not a value from 1 to 12`},
		{"* * * * 8", `day of week field "8": "8" is not a value from 0 to 7`},
		{"* * * * jan", `day of week field "jan": "jan" is not a value from 0 to 7`},
		{"* * * * monday", `day of week field "monday": "monday" is not a value from 0 to 7`},
		{"*/0 * * * *", `minute field "*/0": step "0" is not a positive number`},
		{"*/x * * * *", `minute field "*/x": step "x" is not a positive number`},
		{"5-1 * * * *", `minute field "5-1": range "5-1" runs backwards`},
		{"* * * * fri-mon", `day of week field "fri-mon": range "fri-mon" runs backwards`},
	} {
		_, err := Parse(tc.spec)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: error %v, want %q", tc.spec, err, tc.want)
		}
	}
}
