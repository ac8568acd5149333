package scan

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// quick returns the Scanner's statPath, and its settled for the plugin
// dirs roots (sorted as the Scanner keeps them): a mountGate over this
// process's mount table, or, if it cannot be read, none settled.
func (*osFS) quick(roots []string) (func(string, bool, bool) (ID, error), func(int) bool) {
	g, err := openMountGate(roots)
	if err != nil {
		return statPathLinux, func(int) bool { return false }
	}
	return statPathLinux, g.rootSettled
}

// statPathLinux is statPath. It makes the system call itself, on zpath
// as it is, NUL and all, so that it allocates nothing (unix.Fstatat copies
// the path to add one). When raw, it stats with unix.RawSyscall6, which the
// Go runtime does not see: its sysmon thread, asleep while the agent idles,
// is woken by every system call made the usual way (unix.Syscall6), and
// then polls every 20 µs until the goroutine is done. That is most of what
// an idle scan would cost beyond its one system call per directory. A raw
// call holds the goroutine's thread and P until it returns, so the Scanner
// makes one only below a plugin dir its mountGate finds settled, where a
// stat returns at once.
func statPathLinux(zpath string, follow, raw bool) (ID, error) {
	if sysFstatat == 0 {
		return statPathSys(zpath, follow)
	}
	flags := uintptr(unix.AT_SYMLINK_NOFOLLOW)
	if follow {
		flags = 0
	}
	cwd := unix.AT_FDCWD // a variable: a negative constant converts to no uintptr
	atFDCWD := uintptr(cwd)
	var st unix.Stat_t
	errno := unix.EINTR
	for errno == unix.EINTR {
		if raw {
			_, _, errno = unix.RawSyscall6(sysFstatat, atFDCWD, uintptr(unsafe.Pointer(unsafe.StringData(zpath))), uintptr(unsafe.Pointer(&st)), flags, 0, 0)
		} else {
			_, _, errno = unix.Syscall6(sysFstatat, atFDCWD, uintptr(unsafe.Pointer(unsafe.StringData(zpath))), uintptr(unsafe.Pointer(&st)), flags, 0, 0)
		}
	}
	var err error
	if errno != 0 {
		err = errno
	}
	return dirID(&st, err)
}
