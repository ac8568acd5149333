package register

import (
	"net"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// connectOnceRaw is connectOnce made of raw system calls (socket, connect,
// close), which the Go runtime does not see: made the usual way, each
// wakes the runtime's sysmon thread, asleep while the agent idles, which
// then polls every 20 µs until the check is done. The caller makes sure
// that no lookup of path can hang (see connectNonblockingRaw).
func connectOnceRaw(path string) error {
	fd, err := connectNonblockingRaw(path)
	if err != nil {
		return err
	}
	return closeFD(fd)
}

// connectNonblockingRaw is connectNonblocking made of raw system calls. A
// raw call holds its thread and P until it returns; a connect to a unix
// socket never waits for the listener, so only the lookup of its path
// could, and the caller makes sure that no lookup there can hang
// (Client.Settled). A kernel without the socket system call of its own
// (before 4.3 on 386, s390x and big-endian ppc64, which had only
// socketcall) gets connectNonblocking.
func connectNonblockingRaw(path string) (int, error) {
	var sa unix.RawSockaddrUnix
	if len(path) >= len(sa.Path) {
		return connectNonblocking(path) // which reports it
	}
	sa.Family = unix.AF_UNIX
	for i := range len(path) {
		sa.Path[i] = int8(path[i])
	}
	fd, _, errno := unix.RawSyscall(unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if errno == unix.ENOSYS {
		return connectNonblocking(path)
	}
	if errno != 0 {
		return -1, os.NewSyscallError("socket", errno)
	}
	size := unsafe.Offsetof(sa.Path) + uintptr(len(path)) + 1
	_, _, errno = unix.RawSyscall(unix.SYS_CONNECT, fd, uintptr(unsafe.Pointer(&sa)), size)
	if errno != 0 {
		unix.RawSyscall(unix.SYS_CLOSE, fd, 0, 0)
		return -1, &net.OpError{Op: "dial", Net: "unix", Addr: &net.UnixAddr{Name: path, Net: "unix"}, Err: os.NewSyscallError("connect", errno)}
	}
	return int(fd), nil
}

// nonblockingSocket returns a new unix stream socket, non-blocking and
// close-on-exec from the start: one system call.
func nonblockingSocket() (int, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	return fd, nil
}

// The reads, writes and closes of a connection of its own (pacedConn) on
// a non-blocking unix socket are raw system calls: none of them can wait
// (a read or write that would returns EAGAIN, and closing a unix socket
// sends nothing), so none holds its thread and P for longer than the call.

// readFD reads from the non-blocking descriptor fd into b.
func readFD(fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, _, errno := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// writeFD writes b to the non-blocking descriptor fd, what fits.
func writeFD(fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, _, errno := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// closeFD closes the socket descriptor fd.
func closeFD(fd int) error {
	if _, _, errno := unix.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0); errno != 0 {
		return os.NewSyscallError("close", errno)
	}
	return nil
}
