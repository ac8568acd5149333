//go:build !linux && !darwin && !freebsd && !dragonfly && !netbsd && !openbsd

package main

import (
	"fmt"
	"runtime"
)

// allowUIDSupport reports whether --allow-uid can be enforced here. It
// cannot: register/peercred_other.go reads no peer credentials on this OS.
func allowUIDSupport() error {
	return fmt.Errorf("peer credentials are not supported on %s", runtime.GOOS)
}
