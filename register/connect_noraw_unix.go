//go:build unix && !linux

package register

import (
	"os"

	"golang.org/x/sys/unix"
)

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
