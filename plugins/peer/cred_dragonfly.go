package peer

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Supported is true: this OS tells who is at the other end of a socket.
const Supported = true

// golang.org/x/sys/unix defines neither struct xucred nor LOCAL_PEERCRED
// for DragonFly, so they are spelled out here from <sys/ucred.h> and
// <sys/un.h>; the call is the one getpeereid(3) makes.
const (
	localPeerCred = 0x1 // LOCAL_PEERCRED, at level 0
	xucredVersion = 0   // XUCRED_VERSION
)

type xucred struct {
	version uint32 // cr_version
	uid     uint32 // cr_uid: effective uid
	ngroups int16
	groups  [16]uint32
	_       uintptr
}

// FromFD returns the effective uid the process at the other end of the
// connected unix socket fd had when it called connect or listen. The pid is
// not known.
func FromFD(fd uintptr) (Cred, error) {
	var x xucred
	n := uint32(unsafe.Sizeof(x))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, 0, localPeerCred, uintptr(unsafe.Pointer(&x)), uintptr(unsafe.Pointer(&n)), 0)
	if errno != 0 {
		return Cred{}, fmt.Errorf("LOCAL_PEERCRED: %w", errno)
	}
	if n != uint32(unsafe.Sizeof(x)) || x.version != xucredVersion {
		return Cred{}, fmt.Errorf("LOCAL_PEERCRED: unexpected xucred (%d bytes, version %d)", n, x.version)
	}
	return Cred{UID: x.uid}, nil
}
