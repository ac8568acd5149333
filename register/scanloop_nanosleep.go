//go:build linux || freebsd || netbsd || openbsd || dragonfly

package register

import (
	"context"
	"time"

	"golang.org/x/sys/unix"
)

// maxNap is the longest a nap sleeps without looking at its context: the
// most a scanner between two scans delays the end of Run.
const maxNap = 250 * time.Millisecond

// nap sleeps until t, or until ctx is done, and reports whether ctx is
// still live; it looks at ctx at least every maxNap. It sleeps in a
// blocking nanosleep, not on a Go timer: a goroutine that wakes from a
// timer wakes the runtime's poller and a spinning thread besides its own,
// which on a small VM costs about three times what a thread coming back
// from a system call costs. The scanner naps between scans, most of which
// find nothing and wake no one else, so this is most of the agent's idle
// cost on the BSDs. On Linux a timerfd costs less still (newNap), and this
// is its fallback.
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
