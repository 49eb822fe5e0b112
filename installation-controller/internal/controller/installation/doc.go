// Package installation reconciles Installations with seed 002's phase
// machine: a job starts on a root installation (operation: reconcile, or its
// deletion) or arrives from a parent (status.jobID), walks the installation
// flow (Init → CleanupOrphaned → ObjectsCreated → Progressing → Completing →
// Succeeded/Failed) or the deletion flow (InitDelete → TriggerDelete →
// Deleting → gone/DeleteFailed), and ends with jobIDFinished = jobID.
//
// Reconcile (installation_controller.go) runs five steps of kit/flow:
// ensureFinalizer and startJob (job_start.go: the start rules of package
// jobs), handleInterrupt (interrupt.go), startAutomatically
// (automatic_reconcile.go: automaticReconcile, reconcile-if-changed and
// touch play the reconcile annotation for an idle root; automatic_plan.go
// decides when) and runPhase (installation_phases.go),
// which runs the phases: phase_init.go, orphans.go (CleanupOrphaned),
// phase_progressing.go (ObjectsCreated, Progressing), phase_completing.go,
// phase_deletion.go (InitDelete, TriggerDelete, Deleting), with
// delete_ignore_successors.go and delete_without_uninstall.go. What the
// phases write: sub_objects_sync.go (the execution and the
// sub-installations), context_writes.go (import copies for the
// sub-installations), exports.go. What Init reads: imports.go, and
// target_imports.go (targets, target lists and maps); Init and Completing
// read the blueprint through component_blueprint.go (inline, or
// spec.blueprint.ref of the component version component_version.go
// resolves with the overwrites component_overwrites.go reads, also handed
// to the templates); hand_deleted.go and deleted_during_job.go
// say what happens when a sub-object or the installation is deleted during a
// job. installation_status.go turns a phase's outcome into the status.
//
// Invariants:
//   - A reconcile runs every phase that needs no waiting one after the other
//     (Init → CleanupOrphaned → ObjectsCreated → Progressing, Progressing →
//     Completing → Succeeded) and writes the status once, at its end, through
//     one status.Patcher (a merge patch of the changed fields; no request when
//     nothing changed). Events and metrics of a transition go out only once the
//     status holding it is stored.
//   - A job's start is guarded by the resourceVersion read, so a stale cache
//     can never start a job twice: an install job's start goes with the
//     status write of its first phases, a deletion job's is written on its
//     own before anything is deleted.
//   - Every write of the installation records the resourceVersion it
//     replaced (ownWrites); a reconcile of a cached copy older than this
//     controller's last write is skipped.
//   - A phase ends in a next phase, a wait (flow.Waiting: Ready Unknown,
//     reason Waiting, woken by a watch event, re-checked as a safety net), a
//     failure that ends the job (flow.Stalled: Failed or DeleteFailed, with
//     its lastError reason and code), or an error to retry (lastError
//     TransientError, the controller's back-off).
//   - Sub-objects are only ever met through the API: the controller writes an
//     Execution's spec and hands it a job by applying status.jobID with its
//     own field manager; it hands a sub-installation a job through its
//     status.jobID.
package installation
