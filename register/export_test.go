package register

import (
	"context"
	"testing"
	"testing/synctest"
)

// Hooks for the tests of package register_test, which import
// register/metrics: package register's own tests cannot, since metrics
// imports register.

// SetTimerNap makes r's scanner nap between scans on a Go timer, and its
// loop wait on one, whose time a synctest bubble moves, instead of on a
// timerfd or in a nanosleep, whose time it does not.
func SetTimerNap(r *Reconciler) { r.nap = timerNap }

// RunSteps runs r, in its synctest bubble and with timer naps
// (SetTimerNap), while steps runs (its sleeps are the bubble's), then
// stops it, checks that Run returned nil, and lets a scan still in
// progress end (Run does not wait for one).
func RunSteps(t *testing.T, r *Reconciler, steps func()) {
	t.Helper()
	SetTimerNap(r)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	steps()
	synctest.Wait()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	synctest.Wait()
}

// SetApplied makes r call f on Run's goroutine after the outcome of each
// operation was applied.
func SetApplied(r *Reconciler, f func(Result)) { r.applied = f }
