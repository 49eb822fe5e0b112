package sandbox

import "context"

// Stopper is a reconcile scope whose phases may end a reconcile early without
// an error (nothing to do, or waiting for an event).
type Stopper interface {
	Stopped() bool
}

// RunPhases runs the phases of a reconcile in order until one fails or stops
// the scope. Every reconciler of the provisioner is such a list of small phases.
func RunPhases[S Stopper, P ~func(context.Context, S) error](ctx context.Context, s S, phases []P) error {
	for _, p := range phases {
		if err := p(ctx, s); err != nil {
			return err
		}
		if s.Stopped() {
			return nil
		}
	}
	return nil
}
