package peer

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Supported is true: this OS tells who is at the other end of a socket.
const Supported = true

// golang.org/x/sys/unix defines neither struct unpcbid nor LOCAL_PEEREID
// for NetBSD, so they are spelled out here from <sys/un.h>; the call is the
// one getpeereid(3) makes.
const localPeerEID = 0x3 // LOCAL_PEEREID, at level 0

type unpcbid struct {
	pid  int32  // unp_pid
	euid uint32 // unp_euid
	egid uint32 // unp_egid
}

// FromFD returns the effective uid and the pid of the process at the other
// end of the connected unix socket fd, as of its connect or listen call
// (LOCAL_PEEREID).
func FromFD(fd uintptr) (Cred, error) {
	var id unpcbid
	n := uint32(unsafe.Sizeof(id))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, 0, localPeerEID, uintptr(unsafe.Pointer(&id)), uintptr(unsafe.Pointer(&n)), 0)
	if errno != 0 {
		return Cred{}, fmt.Errorf("LOCAL_PEEREID: %w", errno)
	}
	if n != uint32(unsafe.Sizeof(id)) || id.euid == ^uint32(0) {
		return Cred{}, fmt.Errorf("LOCAL_PEEREID: no credentials (%d bytes, euid %d)", n, id.euid)
	}
	return Cred{UID: id.euid, PID: id.pid}, nil
}
