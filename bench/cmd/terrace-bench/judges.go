package main

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// errorMessage is how a failed job reads in the bench's output.
func errorMessage(e *lsv1alpha1.Error) string {
	if e == nil {
		return "no lastError"
	}
	return e.Reason + ": " + e.Message
}

// jobDone judges Installations, Executions and DeployItems: done when the
// job finished Succeeded, failed when it finished otherwise.
func jobDone(o client.Object) (state, string) {
	var phase lsv1alpha1.Phase
	var job, finished string
	var lastErr *lsv1alpha1.Error
	switch x := o.(type) {
	case *lsv1alpha1.Installation:
		phase, job, finished, lastErr = x.Status.Phase, x.Status.JobID, x.Status.JobIDFinished, x.Status.LastError
	case *lsv1alpha1.Execution:
		phase, job, finished, lastErr = x.Status.Phase, x.Status.JobID, x.Status.JobIDFinished, x.Status.LastError
	case *lsv1alpha1.DeployItem:
		phase, job, finished, lastErr = x.Status.Phase, x.Status.JobID, x.Status.JobIDFinished, x.Status.LastError
	default:
		return pending, ""
	}
	if job == "" || job != finished {
		return pending, ""
	}
	if phase != lsv1alpha1.PhaseSucceeded {
		return failed, fmt.Sprintf("finished %s: %s", phase, errorMessage(lastErr))
	}
	return done, ""
}

func claimBound(o client.Object) (state, string) {
	c, ok := o.(*appstudiov1alpha1.DeploymentTargetClaim)
	if !ok {
		return pending, ""
	}
	switch c.Status.Phase {
	case appstudiov1alpha1.DeploymentTargetClaimPhaseBound:
		return done, ""
	case appstudiov1alpha1.DeploymentTargetClaimPhaseLost:
		return failed, "Lost"
	}
	return pending, ""
}
