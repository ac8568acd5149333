//go:build unix

package scan

import "golang.org/x/sys/unix"

// statPathSys is statPath through the system call package os uses, which
// tells the Go runtime.
func statPathSys(zpath string, follow bool) (ID, error) {
	flags := unix.AT_SYMLINK_NOFOLLOW
	if follow {
		flags = 0
	}
	var st unix.Stat_t
	err := fstatat(unix.AT_FDCWD, zpath[:len(zpath)-1], &st, flags)
	return dirID(&st, err)
}

// fstatat is unix.Fstatat, retrying EINTR as package os does.
func fstatat(dirfd int, name string, st *unix.Stat_t, flags int) error {
	err := unix.Fstatat(dirfd, name, st, flags)
	for err == unix.EINTR {
		err = unix.Fstatat(dirfd, name, st, flags)
	}
	return err
}

// dirID is the ID of st, the result of a stat that returned err, and err,
// or ENOTDIR if st is no directory.
func dirID(st *unix.Stat_t, err error) (ID, error) {
	if err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		err = unix.ENOTDIR
	}
	return statID(st), err
}
