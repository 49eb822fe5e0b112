// Package execution reconciles Executions: it expands spec.deployItems into
// DeployItems (deterministic names, owner reference, labels), hands the
// execution's job to each item once everything it dependsOn has succeeded,
// gathers the items' exports into one DataObject, and runs the deletion flow
// (items deleted in reverse dependency order).
//
// The controller never calls a deployer: it writes an item's spec, its
// reconcile-time annotation and status.jobID, and reads the phase and
// jobIDFinished the deployer writes back. Every write names only the fields
// this controller owns (server-side apply, or merge patches of single keys).
//
// Reconcile (execution_controller.go) runs the steps of seed 002 in order:
// checkOperation, loadItems, ensureFinalizer, handleInterrupt,
// handleDeletion, handleReconcileOperation, startJob, validateDependencies,
// runJob. Where each rule lives:
//
//   - starting a job (operation: reconcile, a handed-over job ID): job_start.go;
//     ending it: job_end.go;
//   - the install phases: install_phases.go (Init, CleanupOrphaned in
//     orphans.go, Completing with exports.go), phase_progressing.go (handing
//     the job to items in dependsOn order; the graph in itemset.go and
//     internal/depgraph);
//   - handing a job to an item (reconcile-time, status.jobID): handover.go;
//     the item options updateOnChangeOnly (an unchanged, succeeded item is
//     not handed the job) and onDelete.skipUninstallIfClusterRemoved:
//     item_options.go;
//   - creating and updating items: items_create.go, items_update.go, names.go;
//     a name held by a namesake on its way out: namesake_wait.go;
//   - interrupt: interrupt.go; deletion: deletion.go (the deletion job and
//     its phases), deletion_order.go (reverse dependency order),
//     delete_without_uninstall.go (InitDelete), deletion_owner.go (who runs
//     the deletion job of an owned execution);
//   - the pickup, progressing and abort timeouts are package timeouts'.
//
// Invariants:
//   - The execution's status is written once per reconcile, at the end
//     (kit/status, server-side apply); status.jobID only while this
//     controller is its writer (a root execution, or a deleted one whose
//     installation is gone); otherwise the installation controller is.
//   - Starting and ending a job is a status write guarded by the
//     resourceVersion read: a reconcile working from a stale copy conflicts
//     instead of starting a second job or ending one twice. Events and
//     metrics of a transition follow its stored write.
//   - ownWrites holds the resourceVersions this controller's writes of the
//     execution replaced; a reconcile of an older cached copy is skipped.
//     handedOver holds those of its hand-overs to items, until the cache
//     shows them: an item just handed the job counts as running.
//   - A job runs the item set it started with (status.deployItemRefs); spec
//     edits mid-job wait for the next job.
//   - The operation annotation that caused a write is removed only after
//     that write is stored, so it is never lost.
package execution
