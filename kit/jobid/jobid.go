// Package jobid holds the job-ID rules shared by every Terrace controller.
//
// A reconcile walk through an installation tree is a job. A parent hands a
// job to a child by writing a fresh ID into the child's status.jobID; the
// child finishes it by copying that ID into status.jobIDFinished in the same
// status write that sets its final phase. Keeping these comparisons in one
// place keeps every controller agreeing on when a job is running.
package jobid

import "github.com/google/uuid"

// New returns a fresh, random job ID (a UUID v4). Random IDs need no
// coordination between controllers or replicas and never repeat, so a
// finished job can never be mistaken for a new one.
func New() string {
	return uuid.NewString()
}

// Finished reports whether the current job is done: the finished ID has caught
// up with the job ID. An object that never had a job (both empty) counts as
// finished, so it is not mistaken for one with work pending.
func Finished(jobID, jobIDFinished string) bool {
	return jobID == jobIDFinished
}

// HasNewJob reports whether a job has been handed over that has not finished
// yet, i.e. whether the owner of the object should start (or continue) work.
func HasNewJob(jobID, jobIDFinished string) bool {
	return jobID != "" && jobID != jobIDFinished
}
