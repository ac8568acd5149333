//go:build freebsd || netbsd || openbsd || dragonfly

package register

import (
	"context"
	"time"

	"golang.org/x/sys/unix"
)

// newNap returns the nap of a scanLoop, and the function that releases it:
// here nap, which holds nothing.
func newNap(context.Context) (func(context.Context, time.Time) bool, func()) {
	return nap, func() {}
}

// newAlarm returns the loop's timer, armed to fire d from now: a channel
// that receives the time when it fires, the function that arms it again
// (time.Timer's Reset), and the one that releases it: here goAlarm.
func newAlarm(_ context.Context, d time.Duration) (<-chan time.Time, func(time.Duration), func()) {
	return goAlarm(d)
}

// nap sleeps until t, or until ctx is done, and reports whether ctx is
// still live; it looks at ctx at least every maxNap. It sleeps in a
// blocking nanosleep, not on a Go timer: a goroutine that wakes from a
// timer wakes the runtime's poller and a spinning thread besides its own,
// which on a small VM costs about three times what a thread coming back
// from a system call costs. The scanner naps between scans, most of which
// find nothing and wake no one else, so this is most of the agent's idle
// cost on the BSDs.
func nap(ctx context.Context, t time.Time) bool {
	for ctx.Err() == nil {
		d := time.Until(t)
		if d <= 0 {
			return true
		}
		ts := unix.NsecToTimespec(int64(min(d, maxNap)))
		unix.Nanosleep(&ts, nil) // interrupted by a signal: the loop sleeps what is left
	}
	return false
}
