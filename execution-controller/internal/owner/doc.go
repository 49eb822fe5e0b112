// Package owner holds the one rule by which the execution controller's parts
// (the execution reconciler's index of deploy items, the timeouts
// reconciler's events) tell that an object is controlled by an Execution.
//
// Invariants:
//   - An Execution's controller reference of any version of the
//     landscaper.gardener.cloud group counts; a kind of that name in another
//     group does not.
package owner
