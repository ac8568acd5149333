//go:build unix

package register

import (
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// connectOnce connects to the unix socket at path and closes the
// connection at once, without a byte sent: the connect check.
func connectOnce(path string) error {
	fd, err := connectNonblocking(path)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// connectNonblocking connects a non-blocking socket of its own, outside
// Go's network poller, to the unix socket at path, and returns its
// descriptor, for the caller to close. The connect never waits: a connect
// to a unix socket succeeds at once when the connection fits in the
// listener's backlog, and fails at once otherwise, with ECONNREFUSED when
// nobody listens (or, on the BSDs, when the backlog is full) and EAGAIN
// when the backlog is full (Linux).
func connectNonblocking(path string) (int, error) {
	fd, err := nonblockingSocket()
	if err != nil {
		return -1, err
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return -1, &net.OpError{Op: "dial", Net: "unix", Addr: &net.UnixAddr{Name: path, Net: "unix"}, Err: os.NewSyscallError("connect", err)}
	}
	return fd, nil
}
