// Package lib is the deployer contract of seeds 001 and 003 and the brief's
// "Deploy items and jobs" decisions, implemented once so that a deployer is
// little more than an implementation of Deployer.
//
// # What the library does for a deployer
//
// Reconciler (register it with AddToManager) watches only the DeployItems of
// Options.Type: it runs its own informer with the field selector
// spec.type=<type> (spec.type is a selectable field of the CRD), so items of
// other types are neither cached nor wake the deployer. Per reconcile it
// follows seed 003's flow:
//
//  1. Start hooks.
//  2. Responsibility: the item's type, and the item's Target must match the
//     deployer's TargetSelector (annotations and labels). An item without a
//     Target, or whose Target is missing or in another namespace, counts as
//     having a Target without annotations and labels, so the deployer of the
//     default environment takes it (and fails it with a configuration error).
//     DuringResponsibilityCheck hooks may overrule the result (ANDed); an
//     item they make the deployer responsible for gets its Target like any
//     other. An item the deployer is not responsible for is never written to.
//     AfterResponsibilityCheck hooks. A spec.context other than "default"
//     must name an existing Context.
//  3. Contract: a job starts when (a) status.jobID != status.jobIDFinished
//     (the execution handed over a job; while in a job, only together with a
//     fresh reconcile-time annotation), (b) operation: reconcile is set (the
//     annotation is removed and a fresh job ID written), (c) the item has no
//     managing execution and metadata.generation != status.observedGeneration,
//     or (d) operation: force-reconcile is set on a finished item that is not
//     being deleted (on one being deleted it is removed unrun). Starting
//     removes reconcile-time, sets phase Init, lastReconcileTime,
//     observedGeneration, status.deployer and the finalizer, and goes on with
//     the steps below in the same reconcile: a synchronous deployer's job
//     starts and ends in one status write (Init is only written when a hook
//     stops the reconcile before the work).
//  4. Should reconcile: only items in a job (Init, Progressing, Deleting),
//     being deleted, or carrying operation abort/force-reconcile. A non-nil
//     ShouldReconcile hook result with AbortReconcile false forces a reconcile
//     (e.g. periodic re-apply); true cannot stop a needed one.
//  5. BeforeAnyReconcile hooks, then exactly one of: Abort (operation: abort;
//     ends Failed with reason Aborted), ForceReconcile, Delete (deletion
//     timestamp; skipped with delete-without-uninstall: "true", and when the
//     Target or Context is unusable but there is nothing to uninstall, see
//     UninstallChecker), Reconcile — each after its Before* hooks.
//  6. End hooks.
//
// Reconcile runs these as named steps (kit/flow), one file per rule:
// hooks.go (the hook types and their aggregation), target.go (Target,
// Context, responsibility), operation.go (the one operation, unknown
// operation values), job_start.go (starting a job, the leftover pickup
// stamp), should_reconcile.go, finalizer.go, apply.go (Reconcile,
// ForceReconcile, the deadline), deletion.go, abort.go, status.go (the
// outcome: phase, lastError, Ready), patch.go and record.go (the writes),
// events.go (Events, metrics, the span), watches.go, calls.go (the call
// timeout of each Deployer call), messages.go (the bounds of status messages
// and Event notes), targetclient.go (TargetClientOptions: the bounds of
// every connection to a target cluster), kubeconfig.go and
// kubeconfig_resolve.go (TargetResolver: a Target's kubeconfig from
// spec.config, a Secret or spec.secretRef), selftarget.go (self targets:
// TokenRequest tokens, renewed), jsonpath.go (the JSONPath evaluator of
// exports), export.go (export Secrets).
//
// A job ends with a final phase and status.jobIDFinished = status.jobID in
// the same status write. Errors become lastError (operation, reason, message,
// codes, times): an *Error (a flow.Error) with ERR_CONFIGURATION_PROBLEM,
// or of kind flow.Stalled (PermanentError), ends the job Failed at once; other errors are retried with exponential back-off
// (1s doubling to 1m) and the job fails once the item's timeout (spec.timeout,
// default Options.DefaultTimeout = 10m; "none" disables it) has passed since
// lastReconcileTime.
//
// # Writes and field ownership
//
// Each reconcile makes at most one status write (kit/status.Patcher, no
// request when nothing changed): a JSON merge patch holding
// only the status fields that changed, with field manager Options.Name, so
// fields other controllers own (status.jobID of the execution controller)
// are never rewritten from a stale copy, guarded by the resourceVersion read,
// so a status computed from an older copy never overwrites the execution
// controller's Failed (timeouts, interrupt). Metadata changes (removing the
// operation / reconcile-time / abort-time annotations, the finalizer) follow
// as a second, metadata-only merge patch with a resourceVersion
// precondition, so a value written meanwhile (a new operation annotation) is
// never removed by mistake. A job that starts on an item without the
// finalizer writes that metadata patch before the deployer's work instead
// (ensureFinalizer), so a deletion always runs the uninstall. The status write precedes the metadata write,
// so a crash in between never loses a started job; a reconcile-time stamp
// such a crash (or a failed metadata write) leaves on a finished item is
// removed by a later reconcile once it is clearly older than the finished
// job (see dropLeftoverPickup). The deployer remembers the
// resourceVersions its last writes replaced (ownWrites); a reconcile that finds one of
// them in the cache waits for the cache instead of writing (which could only
// conflict).
//
// Outcomes and problems are recorded as Kubernetes Events on the item
// (reasons: Succeeded, Failed, Deleting, Deleted, Aborted, ReconcileFailed,
// DeleteFailed, InvalidConfiguration, …), once the write that makes the
// transition succeeded. Job starts and Progressing are not events (logs, the
// trace and terrace_jobs_started_total record them).
//
// # Observability
//
// Each reconcile is a span "DeployItem.Reconcile" (kit/tracing) continuing the
// trace handed over in the item's trace-context annotation; the deployer's
// work is a child span ("DeployItem.Apply", "DeployItem.Delete",
// "DeployItem.Abort"). Jobs are counted with the shared Terrace metrics
// (kit/metrics, kind DeployItem), and terrace_deployitem_pickup_latency_seconds
// measures the time from the hand-over to the job's start.
package lib
