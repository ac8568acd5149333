package register

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// havePeerCred: this OS tells who serves a socket.
const havePeerCred = true

// peerCred returns the effective uid and the pid of the process that
// called listen (SO_PEERCRED: struct sockpeercred { uid_t uid; gid_t gid;
// pid_t pid; }).
//
// golang.org/x/sys/unix has no getsockopt for struct sockpeercred on
// OpenBSD, and OpenBSD kills a process that makes a system call other than
// through libc, so a raw getsockopt is no way out. GetsockoptIPv6Mreq is
// the smallest libc-backed wrapper with room for the 12 bytes (it passes a
// zeroed 20-byte buffer); the kernel copies min(20, 12) bytes into it. A
// pid of 0, which no process has, means nothing was copied.
func peerCred(fd uintptr) (peer, error) {
	m, err := unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return peer{}, fmt.Errorf("SO_PEERCRED: %w", err)
	}
	b := m.Multiaddr[:12]
	p := peer{uid: binary.NativeEndian.Uint32(b[0:4]), pid: int32(binary.NativeEndian.Uint32(b[8:12]))}
	if p.pid <= 0 {
		return peer{}, fmt.Errorf("SO_PEERCRED: no credentials (pid %d)", p.pid)
	}
	return p, nil
}
