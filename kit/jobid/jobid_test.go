package jobid

import (
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestNew(t *testing.T) {
	a, b := New(), New()
	if a == b {
		t.Fatalf("New returned the same ID twice: %q", a)
	}
	for _, id := range []string{a, b} {
		u, err := uuid.Parse(id)
		if err != nil {
			t.Fatalf("New returned %q, not a UUID: %v", id, err)
		}
		if u.Version() != 4 {
			t.Errorf("New returned UUID version %d, want 4", u.Version())
		}
	}
}

func TestFinishedAndHasNewJob(t *testing.T) {
	tests := []struct {
		name                  string
		jobID, jobIDFinished  string
		wantFinished, wantNew bool
	}{
		{name: "never had a job", wantFinished: true, wantNew: false},
		{name: "job handed over", jobID: "a", wantFinished: false, wantNew: true},
		{name: "job finished", jobID: "a", jobIDFinished: "a", wantFinished: true, wantNew: false},
		{name: "next job handed over", jobID: "b", jobIDFinished: "a", wantFinished: false, wantNew: true},
		{name: "job ID cleared after a finished job", jobIDFinished: "a", wantFinished: false, wantNew: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Finished(tt.jobID, tt.jobIDFinished); got != tt.wantFinished {
				t.Errorf("Finished(%q, %q) = %v, want %v", tt.jobID, tt.jobIDFinished, got, tt.wantFinished)
			}
			if got := HasNewJob(tt.jobID, tt.jobIDFinished); got != tt.wantNew {
				t.Errorf("HasNewJob(%q, %q) = %v, want %v", tt.jobID, tt.jobIDFinished, got, tt.wantNew)
			}
		})
	}
}

func TestDerive(t *testing.T) {
	a := Derive("uid-1", "1", "", "")
	if again := Derive("uid-1", "1", "", ""); again != a {
		t.Fatalf("Derive is not deterministic: %q then %q", a, again)
	}
	u, err := uuid.Parse(a)
	if err != nil {
		t.Fatalf("Derive returned %q, not a UUID: %v", a, err)
	}
	if u.Version() != 5 {
		t.Errorf("Derive returned UUID version %d, want 5", u.Version())
	}
	seen := map[string][]string{}
	for _, parts := range [][]string{
		{"uid-1", "1", "", ""},
		{"uid-2", "1", "", ""},
		{"uid-1", "2", "", ""},
		{"uid-1", "1", a, a},
		{"uid-1", "1", "", "", "deleting"},
		{"uid-11", "", "", ""},
		{"uid-1", "1", "", "", ""},
	} {
		id := Derive(parts...)
		if prev, ok := seen[id]; ok {
			t.Errorf("Derive(%q) = Derive(%q) = %q", parts, prev, id)
		}
		seen[id] = parts
	}
}

func TestLeftoverPickupStamp(t *testing.T) {
	pickup := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for name, tc := range map[string]struct {
		job, finished string
		lastPickup    time.Time
		stamp         time.Time
		want          bool
	}{
		"stamp before the finished job's pickup": {"j1", "j1", pickup, pickup.Add(-time.Second), true},
		"stamp of the same second":               {"j1", "j1", pickup, pickup, true},
		"stamp with milliseconds, same second":   {"j1", "j1", pickup, pickup.Add(373 * time.Millisecond), true},
		"stamp newer than the pickup: next job":  {"j1", "j1", pickup, pickup.Add(time.Second), false},
		"job not finished":                       {"j2", "j1", pickup, pickup.Add(-time.Second), false},
		"never picked up":                        {"j1", "j1", time.Time{}, pickup, false},
		"no job ever":                            {"", "", pickup, pickup.Add(-time.Second), false},
	} {
		if got := LeftoverPickupStamp(tc.job, tc.finished, tc.lastPickup, tc.stamp); got != tc.want {
			t.Errorf("%s: LeftoverPickupStamp = %v, want %v", name, got, tc.want)
		}
	}
}
