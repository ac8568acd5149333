//go:build darwin || freebsd

package peer

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Supported is true: this OS tells who is at the other end of a socket.
const Supported = true

// xucredVersion is XUCRED_VERSION of <sys/ucred.h>.
const xucredVersion = 0

// FromFD returns the effective uid the process at the other end of the
// connected unix socket fd had when it called connect or listen
// (LOCAL_PEERCRED, as getpeereid(3) does). The pid is not known.
func FromFD(fd uintptr) (Cred, error) {
	x, err := unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	if err != nil {
		return Cred{}, fmt.Errorf("LOCAL_PEERCRED: %w", err)
	}
	if x.Version != xucredVersion {
		return Cred{}, fmt.Errorf("LOCAL_PEERCRED: xucred version %d, want %d", x.Version, xucredVersion)
	}
	return Cred{UID: x.Uid}, nil
}
