// Package controller wires the execution controller's reconcilers into a
// manager: the Execution reconciler (package execution) and the DeployItem
// timeouts reconciler (package timeouts). The binary and the tests both
// register them through AddToManager, so tests run exactly what ships.
//
// Invariants:
//   - Both reconcilers write under one field manager, FieldManager, so every
//     field the binary owns is attributable to it.
//   - The tests register the reconcilers through AddToManager and play the
//     deployer themselves: no deployer module is needed to test them.
package controller
