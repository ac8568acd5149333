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

// connectOnceRaw is connectOnce: here there is no raw one.
func connectOnceRaw(path string) error { return connectOnce(path) }

// connectNonblockingRaw is connectNonblocking: here there is no raw one.
func connectNonblockingRaw(path string) (int, error) { return connectNonblocking(path) }

// readFD reads from the non-blocking descriptor fd into b.
func readFD(fd int, b []byte) (int, error) { return unix.Read(fd, b) }

// writeFD writes b to the non-blocking descriptor fd, what fits.
func writeFD(fd int, b []byte) (int, error) { return unix.Write(fd, b) }

// closeFD closes the socket descriptor fd.
func closeFD(fd int) error { return os.NewSyscallError("close", unix.Close(fd)) }
