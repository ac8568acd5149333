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
// then polls every 20 µs until the check is done. A raw call holds its
// thread and P until it returns; a connect to a unix socket never waits
// for the listener, so only the lookup of its path could, and the caller
// makes sure that no lookup there can hang (Client.Settled). A kernel
// without the socket system call of its own (before 4.3 on 386, s390x and
// big-endian ppc64, which had only socketcall) gets connectOnce.
func connectOnceRaw(path string) error {
	var sa unix.RawSockaddrUnix
	if len(path) >= len(sa.Path) {
		return connectOnce(path) // which reports it
	}
	sa.Family = unix.AF_UNIX
	for i := range len(path) {
		sa.Path[i] = int8(path[i])
	}
	fd, _, errno := unix.RawSyscall(unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if errno == unix.ENOSYS {
		return connectOnce(path)
	}
	if errno != 0 {
		return os.NewSyscallError("socket", errno)
	}
	size := unsafe.Offsetof(sa.Path) + uintptr(len(path)) + 1
	_, _, errno = unix.RawSyscall(unix.SYS_CONNECT, fd, uintptr(unsafe.Pointer(&sa)), size)
	unix.RawSyscall(unix.SYS_CLOSE, fd, 0, 0)
	if errno != 0 {
		return &net.OpError{Op: "dial", Net: "unix", Addr: &net.UnixAddr{Name: path, Net: "unix"}, Err: os.NewSyscallError("connect", errno)}
	}
	return nil
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
