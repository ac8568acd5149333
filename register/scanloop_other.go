//go:build !(linux || freebsd || netbsd || openbsd || dragonfly)

package register

import (
	"context"
	"time"
)

// nap sleeps until t, or until ctx is done, and reports whether ctx is
// still live. Here, without a nanosleep in golang.org/x/sys, it is a Go
// timer.
func nap(ctx context.Context, t time.Time) bool { return timerNap(ctx, t) }
