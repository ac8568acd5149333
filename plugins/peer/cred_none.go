//go:build !linux && !darwin && !freebsd && !dragonfly && !netbsd && !openbsd && !windows

package peer

import (
	"fmt"
	"runtime"
)

// Supported is false: this OS gives no peer credentials that
// golang.org/x/sys/unix can read. This file's build line is the one list of
// the OSes with peer credentials: each has a cred_GOOS.go (or
// cred_xucred.go) that sets Supported, and Windows has cred_windows.go.
const Supported = false

// FromFD fails: this OS gives no peer credentials that
// golang.org/x/sys/unix can read.
func FromFD(fd uintptr) (Cred, error) {
	return Cred{}, fmt.Errorf("peer credentials are not supported on %s", runtime.GOOS)
}
