//go:build !(linux || freebsd || netbsd || openbsd || dragonfly)

package register

import (
	"context"
	"time"
)

// newNap returns the nap of a scanLoop, and the function that releases it:
// here timerNap, a Go timer, which holds nothing.
func newNap(context.Context) (func(context.Context, time.Time) bool, func()) {
	return timerNap, func() {}
}

// newAlarm returns the loop's timer, armed to fire d from now: a channel
// that receives the time when it fires, the function that arms it again
// (time.Timer's Reset), and the one that releases it: here goAlarm.
func newAlarm(_ context.Context, d time.Duration) (<-chan time.Time, func(time.Duration), func()) {
	return goAlarm(d)
}
