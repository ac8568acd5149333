package peer

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// Supported is true: this OS tells who is at the other end of a socket.
const Supported = true

// FromFD returns the effective uid and the pid of the process at the other
// end of the connected unix socket fd, as of its connect or listen call
// (SO_PEERCRED: struct sockpeercred { uid_t uid; gid_t gid;
// pid_t pid; }).
//
// golang.org/x/sys/unix has no getsockopt for struct sockpeercred on
// OpenBSD, and OpenBSD kills a process that makes a system call other than
// through libc, so a raw getsockopt is no way out. GetsockoptIPv6Mreq is
// the smallest libc-backed wrapper with room for the 12 bytes (it passes a
// zeroed 20-byte buffer); the kernel copies min(20, 12) bytes into it. A
// pid of 0, which no process has, means nothing was copied.
func FromFD(fd uintptr) (Cred, error) {
	m, err := unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return Cred{}, fmt.Errorf("SO_PEERCRED: %w", err)
	}
	b := m.Multiaddr[:12]
	p := Cred{UID: binary.NativeEndian.Uint32(b[0:4]), PID: int32(binary.NativeEndian.Uint32(b[8:12]))}
	if p.PID <= 0 {
		return Cred{}, fmt.Errorf("SO_PEERCRED: no credentials (pid %d)", p.PID)
	}
	return p, nil
}
