package register

import "time"

// Hooks for the tests of package register_test, which import
// register/metrics: package register's own tests cannot, since metrics
// imports register.

// SetTicks makes r take a tick at each value received from ticks instead
// of every Interval.
func SetTicks(r *Reconciler, ticks <-chan time.Time) { r.ticks = ticks }

// SetApplied makes r call f on Run's goroutine after the outcome of each
// operation was applied.
func SetApplied(r *Reconciler, f func(Result)) { r.applied = f }
