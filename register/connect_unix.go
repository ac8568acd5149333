//go:build unix

package register

import (
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// connectOnce connects to the unix socket at path and closes the
// connection at once, without a byte sent: the connect check. It uses a
// non-blocking socket of its own, outside Go's network poller, because it
// never waits: a connect to a unix socket succeeds at once when the
// connection fits in the listener's backlog, and fails at once otherwise,
// with ECONNREFUSED when nobody listens (or, on the BSDs, when the backlog
// is full) and EAGAIN when the backlog is full (Linux).
func connectOnce(path string) error {
	syscall.ForkLock.RLock() // no handler program inherits the socket
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err == nil {
		unix.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	defer unix.Close(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		return os.NewSyscallError("setnonblock", err)
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		return &net.OpError{Op: "dial", Net: "unix", Addr: &net.UnixAddr{Name: path, Net: "unix"}, Err: os.NewSyscallError("connect", err)}
	}
	return nil
}
