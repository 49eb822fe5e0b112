package execution

import (
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// Condition types and reasons (metav1.Conditions on the execution, and the
// reasons of Events, so `kubectl get events --field-selector reason=...` works).
const (
	// ConditionProgressing is True while a job runs; its lastTransitionTime is
	// the job's start (which is also how the job-duration metric survives a
	// controller restart).
	ConditionProgressing = "Progressing"

	ReasonJobStarted          = "JobStarted"
	ReasonSucceeded           = "Succeeded"
	ReasonFailed              = "Failed"
	ReasonDeployItemsFailed   = "DeployItemsFailed"
	ReasonCyclicDependencies  = "CyclicDependencies"
	ReasonUnknownDependencies = "UnknownDependencies"
	ReasonInterrupted         = lsv1alpha1.ReasonInterrupted
	ReasonOrphanDeleteFailed  = "OrphanDeletionFailed"
	ReasonExportsFailed       = "ExportsFailed"
	ReasonDeleteFailed        = "DeleteFailed"
	ReasonDeleted             = "Deleted"
	ReasonReconcileIgnored    = "ReconcileIgnored"
	// ReasonInterruptIgnored: operation: interrupt while no job runs.
	ReasonInterruptIgnored   = "InterruptIgnored"
	ReasonReconcilePostponed = "ReconcilePostponed"
	ReasonWaitingForJob      = "WaitingForJob"
	// ReasonDependenciesRemoved: items of a job cannot start because an item
	// they depend on left the spec mid-job before the job could create it.
	ReasonDependenciesRemoved = "DependenciesRemoved"

	EventItemDeleted = "DeployItemDeleted"
)

// OperationReconcile is lastError.operation for failures of the install flow;
// OperationDelete for the deletion flow.
const (
	OperationReconcile = "Reconcile"
	OperationDelete    = "Delete"
)

// ReasonDeployItemNameConflict: the DeployItem an item maps to exists and is
// controlled by someone else (another execution, or nothing: a user's own).
// ReasonDeployItemInvalid: the API server rejects the item as the template
// describes it. ReasonDataObjectNameConflict: the exports DataObject exists
// and is controlled by someone else.
// ReasonDeployItemNameTaken: the job waits for such a namesake that is on
// its way out (being deleted, or of an earlier execution of the same name)
// to go (the Progressing condition's reason meanwhile, and a Warning event).
// ReasonDataObjectNameTaken: the same for the exports DataObject: the job
// waits for a namesake being deleted to go, to write its exports anew.
const (
	ReasonDeployItemNameConflict = "DeployItemNameConflict"
	ReasonDeployItemNameTaken    = "DeployItemNameTaken"
	ReasonDeployItemInvalid      = "DeployItemInvalid"
	ReasonDataObjectNameConflict = "DataObjectNameConflict"
	ReasonDataObjectNameTaken    = "DataObjectNameTaken"
)
