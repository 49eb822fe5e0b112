// Package depgraph orders the deploy items of an execution by their
// dependsOn lists. It is pure logic, kept apart from the reconciler so that
// ordering, cycle detection and the "what may start / be deleted now"
// decisions are unit-tested without an API server.
//
// Invariants:
//   - A graph is valid when every dependency names an item of it and there
//     is no cycle; an unknown dependency is reported before a cycle.
//   - Every result is deterministic: items in name order wherever the graph
//     leaves the order open.
package depgraph
