package jobid

import (
	"testing"

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
