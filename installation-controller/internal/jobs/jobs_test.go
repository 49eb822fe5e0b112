package jobs

import (
	"testing"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

func TestDecide(t *testing.T) {
	const rec = lsv1alpha1.OperationReconcile
	cases := map[string]struct {
		in   State
		want Decision
	}{
		"new root without annotation":      {State{Root: true}, Decision{Action: Idle}},
		"new root with annotation":         {State{Root: true, Operation: rec}, Decision{Action: StartNewJob, Phase: lsv1alpha1.PhaseInit, RemoveOperation: true}},
		"finished root with annotation":    {State{Root: true, Operation: rec, Phase: lsv1alpha1.PhaseSucceeded, JobID: "1", JobIDFinished: "1"}, Decision{Action: StartNewJob, Phase: lsv1alpha1.PhaseInit, RemoveOperation: true}},
		"annotation during running job":    {State{Root: true, Operation: rec, Phase: lsv1alpha1.PhaseProgressing, JobID: "2", JobIDFinished: "1"}, Decision{Action: Continue, Postponed: true}},
		"running root":                     {State{Root: true, Phase: lsv1alpha1.PhaseInit, JobID: "2", JobIDFinished: "1"}, Decision{Action: Continue}},
		"idle root":                        {State{Root: true, Phase: lsv1alpha1.PhaseFailed, JobID: "1", JobIDFinished: "1"}, Decision{Action: Idle}},
		"root deleted":                     {State{Root: true, Deleting: true, Phase: lsv1alpha1.PhaseSucceeded, JobID: "1", JobIDFinished: "1"}, Decision{Action: StartNewJob, Phase: lsv1alpha1.PhaseInitDelete}},
		"root deleted never reconciled":    {State{Root: true, Deleting: true}, Decision{Action: StartNewJob, Phase: lsv1alpha1.PhaseInitDelete}},
		"root deleted while running":       {State{Root: true, Deleting: true, Phase: lsv1alpha1.PhaseProgressing, JobID: "2", JobIDFinished: "1"}, Decision{Action: Continue}},
		"root delete failed":               {State{Root: true, Deleting: true, Phase: lsv1alpha1.PhaseDeleteFailed, JobID: "2", JobIDFinished: "2"}, Decision{Action: Idle}},
		"root delete failed + reconcile":   {State{Root: true, Deleting: true, Operation: rec, Phase: lsv1alpha1.PhaseDeleteFailed, JobID: "2", JobIDFinished: "2"}, Decision{Action: StartNewJob, Phase: lsv1alpha1.PhaseInitDelete, RemoveOperation: true}},
		"sub idle":                         {State{Phase: lsv1alpha1.PhaseSucceeded, JobID: "1", JobIDFinished: "1"}, Decision{Action: Idle}},
		"sub reconcile annotation":         {State{Operation: rec, Phase: lsv1alpha1.PhaseSucceeded, JobID: "1", JobIDFinished: "1"}, Decision{Action: Idle, RemoveOperation: true, IgnoredReconcile: true}},
		"sub handed first job":             {State{JobID: "1"}, Decision{Action: StartHandedJob, Phase: lsv1alpha1.PhaseInit}},
		"sub handed next job":              {State{Phase: lsv1alpha1.PhaseFailed, JobID: "2", JobIDFinished: "1"}, Decision{Action: StartHandedJob, Phase: lsv1alpha1.PhaseInit}},
		"sub running":                      {State{Phase: lsv1alpha1.PhaseCompleting, JobID: "2", JobIDFinished: "1"}, Decision{Action: Continue}},
		"sub deleted, job handed":          {State{Deleting: true, Phase: lsv1alpha1.PhaseSucceeded, JobID: "2", JobIDFinished: "1"}, Decision{Action: StartHandedJob, Phase: lsv1alpha1.PhaseInitDelete}},
		"sub deleted, retry after fail":    {State{Deleting: true, Phase: lsv1alpha1.PhaseDeleteFailed, JobID: "3", JobIDFinished: "2"}, Decision{Action: StartHandedJob, Phase: lsv1alpha1.PhaseInitDelete}},
		"sub deleted, no job":              {State{Deleting: true, Phase: lsv1alpha1.PhaseSucceeded, JobID: "1", JobIDFinished: "1"}, Decision{Action: Idle}},
		"sub deleting":                     {State{Deleting: true, Phase: lsv1alpha1.PhaseDeleting, JobID: "2", JobIDFinished: "1"}, Decision{Action: Continue}},
		"sub deleted, parent gone":         {State{Deleting: true, ParentGone: true, Phase: lsv1alpha1.PhaseSucceeded, JobID: "1", JobIDFinished: "1"}, Decision{Action: StartNewJob, Phase: lsv1alpha1.PhaseInitDelete}},
		"sub deleted mid-job, parent gone": {State{Deleting: true, ParentGone: true, Phase: lsv1alpha1.PhaseProgressing, JobID: "2", JobIDFinished: "1"}, Decision{Action: Continue}},
		"sub, parent gone, not deleted":    {State{ParentGone: true, Phase: lsv1alpha1.PhaseSucceeded, JobID: "1", JobIDFinished: "1"}, Decision{Action: Idle}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Decide(tc.in); got != tc.want {
				t.Errorf("Decide(%+v) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

// A job is started once its phase is no longer the previous job's: a job
// handed over (phase still final, or none yet) is not; no running job is not.
func TestStarted(t *testing.T) {
	for _, c := range []struct {
		s    State
		want bool
	}{
		{State{JobID: "b", JobIDFinished: "a", Phase: lsv1alpha1.PhaseProgressing}, true},
		{State{JobID: "b", JobIDFinished: "a", Phase: lsv1alpha1.PhaseDeleting}, true},
		{State{JobID: "b", JobIDFinished: "a", Phase: lsv1alpha1.PhaseSucceeded}, false},
		{State{JobID: "b", JobIDFinished: "a"}, false},
		{State{JobID: "a", JobIDFinished: "a", Phase: lsv1alpha1.PhaseProgressing}, false},
	} {
		if got := c.s.Started(); got != c.want {
			t.Errorf("%+v.Started() = %v, want %v", c.s, got, c.want)
		}
	}
}
