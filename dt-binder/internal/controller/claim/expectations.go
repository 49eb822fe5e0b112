package claim

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// expectations remember the claimRef writes of this binder that the manager's
// cache does not show yet, and the writes in flight.
//
// Why, per claim: after the binder wrote spec.claimRef on target A for claim
// X, the next reconcile of X can run before the informer delivers A's new
// version. From the stale cache X looks unbound, and a best-match search would
// claim a second target B. The resourceVersion precondition cannot stop that
// (B really is free). So the reconciler records "X claimed A at
// resourceVersion r" and, while the cache still holds A at r, waits for A's
// update event instead of searching.
//
// Why, per target: claims reconciled in parallel all see the same free targets
// in the same (deterministic) order. Without coordination every one of them
// would write the first target, one would win and the rest would conflict and
// move on to the next, one API round trip per loser per target. A reservation
// makes parallel reconciles skip a target another reconcile is writing, or
// has written but the cache does not show yet. The resourceVersion precondition
// stays the real guard (against other writers); this only avoids needless
// conflicts.
//
// Only one reconcile per claim runs at a time (controller-runtime guarantees
// it), and only one binder is active (leader election), so memory is enough: a
// restarted binder starts from a fresh list that already holds every write.
type expectations struct {
	mu      sync.Mutex
	claims  map[types.NamespacedName]expectation
	targets map[types.NamespacedName]reservation
}

type expectation struct {
	// target is the name of the claimed target.
	target string
	// staleResourceVersion is the target's resourceVersion the write was
	// preconditioned on; a cached copy at this version predates the write.
	staleResourceVersion string
	// unknown: the write's outcome is unknown (it failed with an error
	// other than Conflict or NotFound, such as a timeout: the API server may
	// have applied it all the same). The claim's next reconcile asks the API
	// server before it looks at any other target (loadTargets).
	unknown bool
}

type reservation struct {
	// inFlight: a reconcile is writing this target's claimRef now.
	inFlight bool
	// staleResourceVersion: this binder claimed the target; a cached copy at
	// this version predates the write.
	staleResourceVersion string
}

func (e *expectations) init() {
	if e.claims == nil {
		e.claims = map[types.NamespacedName]expectation{}
		e.targets = map[types.NamespacedName]reservation{}
	}
}

func (e *expectations) get(claim types.NamespacedName) (expectation, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.claims[claim]
	return x, ok
}

// forget drops the claim's expectation and the matching target reservation.
func (e *expectations) forget(claim types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.init()
	if x, ok := e.claims[claim]; ok {
		t := types.NamespacedName{Namespace: claim.Namespace, Name: x.target}
		if r, ok := e.targets[t]; ok && !r.inFlight && r.staleResourceVersion == x.staleResourceVersion {
			delete(e.targets, t)
		}
	}
	delete(e.claims, claim)
}

// reserve marks the target, cached at resourceVersion cachedRV, as being
// claimed. It returns false when another reconcile is claiming it now, or
// this binder already claimed it and the cache does not show that yet.
func (e *expectations) reserve(target types.NamespacedName, cachedRV string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.init()
	if r, ok := e.targets[target]; ok && (r.inFlight || r.staleResourceVersion == cachedRV) {
		return false
	}
	e.targets[target] = reservation{inFlight: true}
	return true
}

// done ends a reservation. claimedAt is the resourceVersion a successful write
// was preconditioned on (it is recorded for claim and target), or "" when the
// write failed (the reservation is dropped).
func (e *expectations) done(claim, target types.NamespacedName, claimedAt string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.init()
	if claimedAt == "" {
		delete(e.targets, target)
		return
	}
	e.targets[target] = reservation{staleResourceVersion: claimedAt}
	e.claims[claim] = expectation{target: target.Name, staleResourceVersion: claimedAt}
}

// unknown records that a claimRef write of claim on target, preconditioned on
// resourceVersion claimedAt, failed in a way that leaves its outcome unknown.
// The target stays reserved at that version (parallel reconciles skip it
// while the cache shows it there), and the claim's next reconcile settles the
// outcome with the API server (resolve or forget).
func (e *expectations) unknown(claim, target types.NamespacedName, claimedAt string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.init()
	e.targets[target] = reservation{staleResourceVersion: claimedAt}
	e.claims[claim] = expectation{target: target.Name, staleResourceVersion: claimedAt, unknown: true}
}

// resolve turns an unknown outcome into a known write: the API server shows
// the target naming the claim.
func (e *expectations) resolve(claim types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.init()
	if x, ok := e.claims[claim]; ok {
		x.unknown = false
		e.claims[claim] = x
	}
}
