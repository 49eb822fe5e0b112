// Package mock is the mock deployer (deploy items of type
// landscaper.gardener.cloud/mock): it touches no cluster and ends each job in
// the phase its provider configuration names. Tests and benchmarks of the
// other controllers use it to drive executions and installations.
//
// # Provider configuration (spec.config)
//
//	apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
//	kind: ProviderConfiguration
//	phase: Succeeded        # Succeeded (default) | Failed | Progressing (stays running until aborted)
//	initialPhase: Failed    # optional, Landscaper's: the phase when phase is not set
//	delay: 2s               # optional: stay Progressing this long first (a requeue, not a sleep)
//	continuousReconcile:    # optional: run a Succeeded item again (cron or every)
//	  every: 5m
//	providerStatus: {...}   # optional: copied into status.providerStatus (give it apiVersion and kind)
//	export: {...}           # optional: published in the export Secret
//
// An empty spec.config behaves like phase Succeeded. initialPhase is, in
// Landscaper, the phase a job takes when it starts; every job starts afresh,
// so without phase it is the phase each job ends in. continuousReconcile
// runs a Succeeded item again on its schedule (same job, its export written
// again), never more often than Options.MinContinuousReconcileInterval
// (--min-continuous-reconcile-interval, default 1m): a more frequent one
// fails the item naming the bound. A configuration that
// cannot be decoded (unknown fields, wrong apiVersion/kind, unknown phase)
// ends the job Failed with ERR_CONFIGURATION_PROBLEM and a lastError naming
// the field.
//
// # Exports
//
// When the configuration has an export, the deployer writes (server-side
// apply) the Secret "<item name>-export" in the item's namespace, owned by the
// item, and points status.exportRef{name,namespace} at it. The Secret's key
// "export" (ExportKey) holds the export as JSON (which is also YAML). The
// Secret is deleted with the item (unless delete-without-uninstall is set),
// also when the item's Target has gone missing: the mock installs nothing on
// targets. A Secret of that name that the item did not write (it lacks the
// label lib.ExportOwnerLabel) is never taken over or deleted: the job fails
// with reason ExportSecretConflict instead.
//
// # Phase Failed
//
// lastError gets operation Reconcile, reason MockFailed, code
// ERR_CONFIGURATION_PROBLEM (the item asked to fail; retrying cannot help).
//
// Invariants:
//   - The mock makes no request to any target cluster; besides what the
//     library writes to the item, its only write is the item's export Secret.
//   - A job ends in the configured phase within one reconcile, unless a delay
//     or phase Progressing keeps it pending (a requeue, never a sleep).
package mock
