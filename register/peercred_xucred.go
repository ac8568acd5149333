//go:build darwin || freebsd

package register

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// havePeerCred: this OS tells who serves a socket.
const havePeerCred = true

// xucredVersion is XUCRED_VERSION of <sys/ucred.h>.
const xucredVersion = 0

// peerCred returns the effective uid the serving process had when it
// called listen (LOCAL_PEERCRED, as getpeereid(3) does). The pid is not
// known.
func peerCred(fd uintptr) (peer, error) {
	x, err := unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	if err != nil {
		return peer{}, fmt.Errorf("LOCAL_PEERCRED: %w", err)
	}
	if x.Version != xucredVersion {
		return peer{}, fmt.Errorf("LOCAL_PEERCRED: xucred version %d, want %d", x.Version, xucredVersion)
	}
	return peer{uid: x.Uid}, nil
}
