package register

import (
	"context"
	"time"
)

// maxNap is the longest a nap sleeps without looking at its context: the
// most a scanner between two scans delays the end of Run.
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
