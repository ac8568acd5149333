package peer

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Supported is true: this OS tells who is at the other end of a socket.
const Supported = true

// FromFD returns the credentials the process at the other end of the
// connected unix socket fd had when it called connect or listen
// (SO_PEERCRED).
func FromFD(fd uintptr) (Cred, error) {
	u, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return Cred{}, fmt.Errorf("SO_PEERCRED: %w", err)
	}
	return Cred{UID: u.Uid, PID: u.Pid}, nil
}
