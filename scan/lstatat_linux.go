package scan

import (
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// lstatAt stats name in the directory dirfd (unix.AT_FDCWD: name is a
// path), without following a symlink, retrying EINTR as package os does.
// It is the one call that takes a socket's identity: a Scan's (osDir.id)
// and StatSocket's.
//
// Where unix.Fstatat is one system call into a unix.Stat_t (sysFstatat),
// lstatAt makes that call itself, with name copied to a buffer on the
// stack: unix.Fstatat allocates a copy of it for the terminating NUL, and
// a liveness check stats every registered socket.
func lstatAt(dirfd int, name string, st *unix.Stat_t) error {
	return lstatAtSys(dirfd, name, st, false)
}

// lstatAtRaw is lstatAt made with unix.RawSyscall6, which the Go runtime
// does not see (see statPathLinux), where the platform has the system call
// (sysFstatat); lstatAt elsewhere.
func lstatAtRaw(dirfd int, name string, st *unix.Stat_t) error {
	return lstatAtSys(dirfd, name, st, true)
}

// lstatAtSys is lstatAt, made raw if raw.
func lstatAtSys(dirfd int, name string, st *unix.Stat_t, raw bool) error {
	var buf [lstatAtBuf]byte
	if sysFstatat == 0 || len(name) >= len(buf) || strings.IndexByte(name, 0) >= 0 {
		return fstatat(dirfd, name, st, unix.AT_SYMLINK_NOFOLLOW)
	}
	copy(buf[:], name)   // and a NUL after it: buf is zeroed
	fd := uintptr(dirfd) // a variable: unix.AT_FDCWD is a negative constant
	for {
		// Each call converts its pointers in its own argument list, where
		// the compiler keeps what they point to alive and in place.
		var errno unix.Errno
		if raw {
			_, _, errno = unix.RawSyscall6(sysFstatat, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(st)), unix.AT_SYMLINK_NOFOLLOW, 0, 0)
		} else {
			_, _, errno = unix.Syscall6(sysFstatat, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(st)), unix.AT_SYMLINK_NOFOLLOW, 0, 0)
		}
		switch errno {
		case 0:
			return nil
		case unix.EINTR:
			continue
		}
		return errno
	}
}

// lstatAtBuf is the size of lstatAt's buffer: a name of a directory entry
// (at most 255 bytes) and any socket path that can be dialled
// (MaxSocketPath), with their NUL.
const lstatAtBuf = 256
