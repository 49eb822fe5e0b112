// Package patch holds the narrow writes the execution controller makes to
// objects whose other fields belong to someone else (deploy items belong to
// their deployer). Each write names exactly the fields it changes, so it can
// never overwrite a field it does not own.
//
// Invariants:
//   - A write that would change nothing sends no request.
//   - Failing an item is one status write guarded by its resourceVersion, so
//     a deployer's concurrent write wins.
package patch
