//go:build !linux

package register

import (
	"context"
	"time"
)

// newNap returns the nap of a scanLoop, and the function that releases it:
// here nap, which holds nothing.
func newNap(context.Context) (func(context.Context, time.Time) bool, func()) {
	return nap, func() {}
}
