package register

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// havePeerCred: this OS tells who serves a socket.
const havePeerCred = true

// golang.org/x/sys/unix defines neither struct unpcbid nor LOCAL_PEEREID
// for NetBSD, so they are spelled out here from <sys/un.h>; the call is the
// one getpeereid(3) makes.
const localPeerEID = 0x3 // LOCAL_PEEREID, at level 0

type unpcbid struct {
	pid  int32  // unp_pid
	euid uint32 // unp_euid
	egid uint32 // unp_egid
}

// peerCred returns the effective uid and the pid of the process that
// called listen (LOCAL_PEEREID).
func peerCred(fd uintptr) (peer, error) {
	var id unpcbid
	n := uint32(unsafe.Sizeof(id))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, 0, localPeerEID, uintptr(unsafe.Pointer(&id)), uintptr(unsafe.Pointer(&n)), 0)
	if errno != 0 {
		return peer{}, fmt.Errorf("LOCAL_PEEREID: %w", errno)
	}
	if n != uint32(unsafe.Sizeof(id)) || id.euid == ^uint32(0) {
		return peer{}, fmt.Errorf("LOCAL_PEEREID: no credentials (%d bytes, euid %d)", n, id.euid)
	}
	return peer{uid: id.euid, pid: id.pid}, nil
}
