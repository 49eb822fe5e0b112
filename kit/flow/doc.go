// Package flow is the shape every Terrace reconciler has: a list of small
// named steps run in order over one reconcile's scope, one way for a step to
// end the list or ask to be called again, one merge of those requests, and
// one error taxonomy that says what a failure means for the user.
//
// A reconciler reads its object, builds a scope, and runs its steps:
//
//	res, err := flow.Run(ctx, s,
//		r.ensureFinalizer,
//		r.startJob,
//		r.runPhase,
//	)
//	return r.outcomes.Finish(ctx, req.NamespacedName, res, err, report)
//
// Invariants:
//   - A step returns Continue(), Stop() (nothing more to do in this
//     reconcile: done, or waiting for a watch event) or either of them with
//     RequeueAfter; an error always ends the list.
//   - Requests to requeue merge as Cluster API merges them: the lowest
//     non-zero delay wins, so no step's deadline is missed.
//   - Errors are one of three kinds. Stalled: the configuration is wrong
//     and retrying cannot help; the user must change something, and the
//     object's next change brings it back. Waiting: another object must
//     change first; its watch event brings this one back. Transient:
//     anything else (an API error, a timeout); retried with back-off.
//     An error that is no *Error is transient.
//   - A conflict (the object changed between read and write) is no failure
//     but a lost race; Outcomes retries it on the newer copy and reports it
//     only when it keeps recurring.
package flow
