package register

import (
	"context"
	"time"
)

// The scanner's sleep between scans and the loop's timer are the wake
// seam: newNap and newAlarm, one of each per OS family (see the package
// doc's per-OS files), with the Go timer below as the portable one.

// maxNap is the longest a nap that cannot be woken (a blocking nanosleep)
// sleeps without looking at its context: the most a scanner between two
// scans delays the end of Run.
const maxNap = 250 * time.Millisecond

// timerNap sleeps until t on a Go timer, or until ctx is done, and reports
// whether ctx is still live.
func timerNap(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return ctx.Err() == nil
	}
}

// goAlarm is the loop's timer made of a time.Timer: the channel it fires
// on, its Reset and its Stop.
func goAlarm(d time.Duration) (<-chan time.Time, func(time.Duration), func()) {
	timer := time.NewTimer(d)
	return timer.C, func(d time.Duration) { timer.Reset(d) }, func() { timer.Stop() }
}

// alarm returns the loop's timer, armed to fire d from now (see newAlarm),
// or goAlarm's while the scanner naps on a Go timer in tests (r.nap), so
// that a synctest bubble moves the time of both.
func (r *Reconciler) alarm(ctx context.Context, d time.Duration) (<-chan time.Time, func(time.Duration), func()) {
	if r.nap != nil {
		return goAlarm(d)
	}
	return newAlarm(ctx, d)
}
