package register

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// havePeerCred: this OS tells who serves a socket.
const havePeerCred = true

// peerCred returns the credentials the serving process had when it called
// listen (SO_PEERCRED).
func peerCred(fd uintptr) (peer, error) {
	u, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return peer{}, fmt.Errorf("SO_PEERCRED: %w", err)
	}
	return peer{uid: u.Uid, pid: u.Pid}, nil
}
