package lib

import "time"

// SetSelfTargetClock makes r's self targets tell time by now.
func SetSelfTargetClock(r *TargetResolver, now func() time.Time) { r.self.now = now }
