// Package jobid holds the job-ID rules shared by every Terrace controller.
//
// A reconcile walk through an installation tree is a job. A parent hands a
// job to a child by writing a fresh ID into the child's status.jobID; the
// child finishes it by copying that ID into status.jobIDFinished in the same
// status write that sets its final phase. Keeping these comparisons in one
// place keeps every controller agreeing on when a job is running.
package jobid

import (
	"fmt"
	"time"

	"github.com/google/uuid"
)

// New returns a fresh, random job ID (a UUID v4). Random IDs need no
// coordination between controllers or replicas and never repeat, so a
// finished job can never be mistaken for a new one.
func New() string {
	return uuid.NewString()
}

// jobNamespace is the name space of derived job IDs (a fixed random UUID).
var jobNamespace = uuid.MustParse("7b0b8e3c-5f1e-4c55-9a0e-2f6f3d1c9a41")

// Derive returns the job ID that follows from the state a controller read
// (a name-based UUID v5 of parts, e.g. the object's UID, its generation and
// the previous job ID). A reconcile that starts a job and creates its
// sub-objects before the start is written can then be repeated after a
// conflict: reading the same state it starts the same job again, instead of
// a second one. Because the previous job ID is part of the state, every job
// gets an ID of its own.
func Derive(parts ...string) string {
	var b []byte
	for _, p := range parts {
		// Length-prefixed, so ("ab","c") and ("a","bc") differ.
		b = append(b, fmt.Sprintf("%d:%s;", len(p), p)...)
	}
	return uuid.NewSHA1(jobNamespace, b).String()
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

// LeftoverPickupStamp reports whether a reconcile-time stamp set at stamp is
// left over from the job a deploy item already finished: the item finished
// its job (jobIDFinished = jobID, not empty) and picked it up (lastPickup,
// its status.lastReconcileTime; zero if never) no earlier than the stamp's
// second (lastReconcileTime has second precision, the stamp may have
// milliseconds).
// Only the stamp's removal, a write after the job's final status, was lost;
// nobody waits for a pickup. A stamp of the next job is written before that
// job's ID, so it is newer than the last pickup (stamps have a resolution of
// one second: one of the same second counts as left over only until the new
// ID is written right after it). The execution controller's pickup timeout
// ignores such a stamp, and the deployer library removes it.
func LeftoverPickupStamp(jobID, jobIDFinished string, lastPickup, stamp time.Time) bool {
	return jobID != "" && Finished(jobID, jobIDFinished) && !lastPickup.IsZero() && !stamp.Truncate(time.Second).After(lastPickup)
}
