//go:build dragonfly || freebsd || netbsd || openbsd || solaris

package register

import (
	"os"

	"golang.org/x/sys/unix"
)

// nonblockingSocket returns a new unix stream socket, non-blocking and
// close-on-exec from the start: one system call.
func nonblockingSocket() (int, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	return fd, nil
}
