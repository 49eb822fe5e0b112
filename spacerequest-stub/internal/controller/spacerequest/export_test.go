package spacerequest

import "time"

// SetClock sets the reconciler's clock. Call it before the reconciler
// starts; now must be safe for concurrent use.
func (r *Reconciler) SetClock(now func() time.Time) { r.now = now }
