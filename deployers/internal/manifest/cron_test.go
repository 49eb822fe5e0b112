package manifest

import (
	"testing"
	"time"
)

func TestCronNext(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct{ spec, from, want string }{
		{"* * * * *", "2026-03-01T10:00:30Z", "2026-03-01T10:01:00Z"},
		{"*/15 * * * *", "2026-03-01T10:01:00Z", "2026-03-01T10:15:00Z"},
		{"30 2 * * *", "2026-03-01T10:00:00Z", "2026-03-02T02:30:00Z"},
		{"0 0 1 */3 *", "2026-03-01T10:00:00Z", "2026-04-01T00:00:00Z"},
		{"0 9 * * 1-5", "2026-02-27T10:00:00Z", "2026-03-02T09:00:00Z"}, // Friday → Monday
		{"0 0 * * 7", "2026-03-01T10:00:00Z", "2026-03-08T00:00:00Z"},   // 7 is Sunday
		{"0 0 13 * 5", "2026-03-01T10:00:00Z", "2026-03-06T00:00:00Z"},  // the 13th or a Friday
		{"5,10 1-2 * * *", "2026-03-01T01:06:00Z", "2026-03-01T01:10:00Z"},
	}
	for _, tc := range cases {
		c, err := ParseCron(tc.spec)
		if err != nil {
			t.Fatalf("%s: %v", tc.spec, err)
		}
		if got := c.Next(at(tc.from)); !got.Equal(at(tc.want)) {
			t.Errorf("%s from %s: %s, want %s", tc.spec, tc.from, got.Format(time.RFC3339), tc.want)
		}
	}
	if c, _ := ParseCron("0 0 30 2 *"); !c.Next(at("2026-01-01T00:00:00Z")).IsZero() {
		t.Error("February 30th never comes")
	}
	for _, bad := range []string{"* * * *", "60 * * * *", "* * * * 8", "*/0 * * * *", "5-1 * * * *", "a * * * *"} {
		if _, err := ParseCron(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}
