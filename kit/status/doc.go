// Package status writes what a reconcile computed: an object's status,
// once, at the end of the reconcile, and the conditions and lastError in it.
//
// Invariants:
//   - A Patcher snapshots the object when the reconcile starts; Patch sends
//     only the status fields that changed since (a merge patch, or a
//     server-side apply of the status as a whole) and no request at all
//     when nothing changed. Each write is the base of the next.
//   - Every write of the object that goes through a Patcher (the status,
//     and metadata writes wrapped in Track) records the resourceVersion it
//     replaced in the reconciler's stale.Versions, so that a later reconcile
//     of a cached copy older than that write is skipped.
//   - What reports a transition (Events, metrics) is queued with OnStored
//     and runs only once the status holding it is stored: a write that
//     conflicts reports nothing.
//   - Condition and lastError messages are cut to a bound, so no quoted
//     cause can grow an object without limit.
package status
