package register

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// nonblockingSocket returns a new unix stream socket, non-blocking and
// close-on-exec. socket(2) takes no such flags here: they are set after,
// under syscall.ForkLock, so that no handler program started meanwhile
// inherits the socket.
func nonblockingSocket() (int, error) {
	syscall.ForkLock.RLock()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err == nil {
		unix.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, os.NewSyscallError("setnonblock", err)
	}
	return fd, nil
}
