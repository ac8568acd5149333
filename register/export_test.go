package register

// Hooks for the tests of package register_test, which import
// register/metrics: package register's own tests cannot, since metrics
// imports register.

// SetTimerNap makes r's scanner nap between scans on a Go timer, and its
// loop wait on one, whose time a synctest bubble moves, instead of on a
// timerfd or in a nanosleep, whose time it does not.
func SetTimerNap(r *Reconciler) { r.nap = timerNap }

// SetApplied makes r call f on Run's goroutine after the outcome of each
// operation was applied.
func SetApplied(r *Reconciler, f func(Result)) { r.applied = f }
