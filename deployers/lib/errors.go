package lib

import (
	"errors"
	"fmt"
	"slices"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/unknownop"
)

// Operations written into lastError.operation by the library.
const (
	OperationReconcile      = "Reconcile"
	OperationDelete         = "Delete"
	OperationAbort          = "Abort"
	OperationForceReconcile = "ForceReconcile"
	OperationTarget         = "ResolveTarget"
	OperationHook           = "ExtensionHook"
)

// Reasons the library itself writes into lastError and Events.
const (
	ReasonAborted           = "Aborted"
	ReasonTargetNotFound    = "TargetNotFound"
	ReasonContextNotFound   = "ContextNotFound"
	ReasonTargetNamespace   = "TargetInOtherNamespace"
	ReasonTargetType        = "WrongTargetType"
	ReasonTimeout           = "Timeout"
	ReasonUninstallSkipped  = "UninstallSkipped"
	ReasonDeleteFailed      = "DeleteFailed"
	ReasonReconcileFailed   = "ReconcileFailed"
	ReasonJobStarted        = "JobStarted"
	ReasonSucceeded         = "Succeeded"
	ReasonFailed            = "Failed"
	ReasonDeleted           = "Deleted"
	ReasonProgressing       = "Progressing"
	ReasonDeleting          = "Deleting"
	ReasonInvalidConfig     = "InvalidConfiguration"
	ReasonStatusWriteFailed = "StatusWriteFailed"
	// ReasonTargetSecretNotFound: the Target exists, but the Secret its
	// spec.secretRef names does not.
	ReasonTargetSecretNotFound = "TargetSecretNotFound"
	// ReasonProgressingTimeout: the execution controller aborted the job
	// because its progressing timeout expired (lastError as Landscaper
	// reports a progressing timeout: this reason and ERR_TIMEOUT).
	ReasonProgressingTimeout = lsv1alpha1.ReasonProgressingTimeout
	// ReasonUnknownOperation: a Warning Event for a value of the operation
	// annotation the deployer does not know (it is ignored).
	ReasonUnknownOperation = unknownop.Reason
)

// Error is an error that carries the lastError fields the contract asks for:
// a flow.Error. Deployers return it (wrapped or not) from their methods; any
// other error is reported with the library's defaults (reason
// ReconcileFailed/DeleteFailed, code ERR_INTERNAL_PROBLEM, retried). An
// error of kind flow.Stalled, or one carrying ERR_CONFIGURATION_PROBLEM,
// ends the job Failed at once: retrying cannot help.
type Error = flow.Error

// NewError returns an Error; it is permanent if codes contain ERR_CONFIGURATION_PROBLEM.
func NewError(reason, message string, codes ...lsv1alpha1.ErrorCode) *Error {
	e := &Error{Reason: reason, Message: message, Codes: codes}
	if slices.Contains(codes, lsv1alpha1.ErrorConfigurationProblem) {
		e.Kind = flow.Stalled
	}
	return e
}

// PermanentError is a permanent error with the given codes: one that ends
// the job Failed at once without being a configuration problem (a refusal,
// a timeout the deployer itself detected).
func PermanentError(reason, message string, codes ...lsv1alpha1.ErrorCode) *Error {
	return &Error{Kind: flow.Stalled, Reason: reason, Message: message, Codes: codes}
}

// ConfigError is a permanent error with code ERR_CONFIGURATION_PROBLEM: bad
// input that retrying cannot fix.
func ConfigError(reason, format string, args ...any) *Error {
	return &Error{Kind: flow.Stalled, Reason: reason, Message: fmt.Sprintf(format, args...), Codes: []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorConfigurationProblem}}
}

// TransientError is an error worth retrying (e.g. an unreachable cluster);
// the library retries it with back-off until the item's timeout.
func TransientError(reason string, err error, codes ...lsv1alpha1.ErrorCode) *Error {
	return &Error{Kind: flow.Transient, Reason: reason, Message: err.Error(), Codes: codes, Err: err}
}

// IsPermanent reports whether err ends a job Failed without retrying.
func IsPermanent(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	return e.Kind == flow.Stalled || slices.Contains(e.Codes, lsv1alpha1.ErrorConfigurationProblem)
}

// toLastError converts err to the lastError fields, using the defaults when
// err carries no reason or codes.
func toLastError(defaultReason string, err error) (reason, message string, codes []lsv1alpha1.ErrorCode) {
	reason = flow.ReasonOf(err, defaultReason)
	var e *Error
	if errors.As(err, &e) {
		codes = slices.Clone(e.Codes)
	}
	if len(codes) == 0 {
		codes = []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorInternalProblem}
	}
	return reason, err.Error(), codes
}
