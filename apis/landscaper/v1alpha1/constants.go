package v1alpha1

// Annotations the seeds define on orchestration objects.
const (
	// OperationAnnotation asks a controller for an operation; see the Operation* values.
	OperationAnnotation = GroupName + "/operation"
	// ReconcileTimeAnnotation is stamped (RFC 3339) by the execution controller when it
	// hands a job to a deploy item; a deployer removes it on pickup. Its age drives
	// the pickup timeout.
	ReconcileTimeAnnotation = GroupName + "/reconcile-time"
	// AbortTimeAnnotation is stamped together with operation=abort; its age drives
	// the abort timeout.
	AbortTimeAnnotation = GroupName + "/abort-time"
	// AbortReasonAnnotation says why the execution controller asked for an
	// abort, "<Reason>: <message>" (e.g. "ProgressingTimeout: ..."). It is
	// written with operation=abort and abort-time in one write and removed with
	// them; a deployer ends the item with that reason (and ERR_TIMEOUT for a
	// timeout) instead of a plain "aborted on request". Terrace's own key: not
	// part of Landscaper's contract.
	AbortReasonAnnotation = "terrace.dev/abort-reason"
	// DeleteWithoutUninstallAnnotation ("true") deletes objects without removing what
	// they installed.
	DeleteWithoutUninstallAnnotation = GroupName + "/delete-without-uninstall"
	// DeleteIgnoreSuccessorsAnnotation ("true") deletes an installation without
	// waiting for its successors (seed 002 writes it with a double slash; that is a typo).
	DeleteIgnoreSuccessorsAnnotation = GroupName + "/delete-ignore-successors"
	// DependsOnAnnotation on a DeployItem created by an execution lists (comma-separated,
	// sorted) the items of that execution it depends on. It keeps an item's place in the
	// dependency graph after it left the execution's spec, so orphans can be deleted in
	// reverse dependency order.
	DependsOnAnnotation = "execution.landscaper.gardener.cloud/depends-on"
	// EnvironmentAnnotation on a Target names the (fenced) environment it lives in;
	// deployers select the Targets they serve by it.
	EnvironmentAnnotation = GroupName + "/environment"
)

// Operation is a value of OperationAnnotation.
type Operation string

// Operations.
const (
	// OperationReconcile starts a new job (root installations, executions without
	// owner, deploy items).
	OperationReconcile Operation = "reconcile"
	// OperationForceReconcile makes a deployer reconcile even if nothing changed.
	OperationForceReconcile Operation = "force-reconcile"
	// OperationAbort asks a deployer to stop gracefully and end Failed.
	OperationAbort Operation = "abort"
	// OperationInterrupt ends a running job on an installation or execution and its
	// whole sub-tree.
	OperationInterrupt Operation = "interrupt"
)

// Labels.
const (
	// ManagedByExecutionLabel on a DeployItem names its execution.
	ManagedByExecutionLabel = "execution.landscaper.gardener.cloud/managed-by"
	// ExecutionItemNameLabel on a DeployItem holds its name inside the execution spec.
	ExecutionItemNameLabel = "execution.landscaper.gardener.cloud/name"
	// EncompassedByLabel on a sub-installation or execution names its parent installation.
	EncompassedByLabel = GroupName + "/encompassed-by"
	// SubInstallationNameLabel on a sub-installation holds its template name.
	SubInstallationNameLabel = GroupName + "/subinstallation-name"
)

// Finalizer is set on every orchestration object its controller manages.
const Finalizer = "finalizer.landscaper.gardener.cloud"

// DefaultContextName is the Context used when spec.context is empty. A missing
// Context of this name counts as empty; any other missing Context is an error.
const DefaultContextName = "default"

// Phase is the lifecycle phase of an installation, execution or deploy item.
type Phase string

// Phases of the installation flow (seed 002), shared by executions and, for the
// subset the deployer contract names, by deploy items.
const (
	PhaseInit            Phase = "Init"
	PhaseCleanupOrphaned Phase = "CleanupOrphaned"
	PhaseObjectsCreated  Phase = "ObjectsCreated"
	PhaseProgressing     Phase = "Progressing"
	PhaseCompleting      Phase = "Completing"
	PhaseSucceeded       Phase = "Succeeded"
	PhaseFailed          Phase = "Failed"
)

// Phases of the deletion flow.
const (
	PhaseInitDelete    Phase = "InitDelete"
	PhaseTriggerDelete Phase = "TriggerDelete"
	PhaseDeleting      Phase = "Deleting"
	PhaseDeleteFailed  Phase = "DeleteFailed"
)

// IsFinal reports whether a phase ends a job (Succeeded, Failed, DeleteFailed).
func (p Phase) IsFinal() bool {
	return p == PhaseSucceeded || p == PhaseFailed || p == PhaseDeleteFailed
}

// IsFailed reports whether a phase is a failure (Failed, DeleteFailed).
func (p Phase) IsFailed() bool { return p == PhaseFailed || p == PhaseDeleteFailed }

// Error codes (lastError.codes).
const (
	ErrorTimeout                ErrorCode = "ERR_TIMEOUT"
	ErrorConfigurationProblem   ErrorCode = "ERR_CONFIGURATION_PROBLEM"
	ErrorCyclicDependencies     ErrorCode = "ERR_CYCLIC_DEPENDENCIES"
	ErrorInternalProblem        ErrorCode = "ERR_INTERNAL_PROBLEM"
	ErrorUnauthorized           ErrorCode = "ERR_UNAUTHORIZED"
	ErrorInsufficientPermission ErrorCode = "ERR_INSUFFICIENT_PERMISSION"
	ErrorForInfoOnly            ErrorCode = "ERR_FOR_INFO_ONLY"
	ErrorInterrupted            ErrorCode = "ERR_INTERRUPTED"
)

// Operations and reasons used in lastError by the deploy-item timeouts (seed 001).
const (
	OperationWaitingForPickup = "WaitingForPickup"
	OperationWaitingForAbort  = "WaitingForAbort"
	OperationInterrupted      = "Interrupt"

	ReasonPickupTimeout      = "PickupTimeout"
	ReasonProgressingTimeout = "ProgressingTimeout"
	ReasonAbortingTimeout    = "AbortingTimeout"
	ReasonInterrupted        = "Interrupted"
)

// Condition types used beside the phase.
const (
	// ConditionReady summarises whether the object's last job succeeded.
	ConditionReady = "Ready"
)

// Well-known deploy-item types.
const (
	ManifestDeployItemType = GroupName + "/kubernetes-manifest"
	MockDeployItemType     = GroupName + "/mock"
	HelmDeployItemType     = GroupName + "/helm"
)

// Well-known target types.
const (
	// KubernetesClusterTargetType targets a cluster; its config holds {"kubeconfig": "..."}
	// or its secretRef a kubeconfig.
	KubernetesClusterTargetType = GroupName + "/kubernetes-cluster"
)
