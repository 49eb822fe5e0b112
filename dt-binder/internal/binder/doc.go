// Package binder wires the dt-binder's two reconcilers into a manager: the
// claim reconciler (package controller/claim: binding, dynamic-provisioning
// marking, reclaim on claim deletion) and the target reconciler (package
// controller/target: target phase, Released, Failed on UnableToTerminate).
// Its envtest suite exercises both together against a real API server.
//
// Invariants:
//   - the field indexes of package binding are registered before either
//     reconciler, which both read through them;
//   - every write of both goes out with the field manager "dt-binder";
//   - one binder is active at a time (leader election): the claim
//     reconciler's expectations live in memory.
package binder
