//go:build unix && !linux

package scan

import "golang.org/x/sys/unix"

// lstatAt stats name in the directory dirfd (unix.AT_FDCWD: name is a
// path), without following a symlink, retrying EINTR as package os does.
// It is the one call that takes a socket's identity: a Scan's (osDir.id)
// and StatSocket's.
func lstatAt(dirfd int, name string, st *unix.Stat_t) error {
	return fstatat(dirfd, name, st, unix.AT_SYMLINK_NOFOLLOW)
}

// lstatAtRaw is lstatAt: here there is no raw one.
func lstatAtRaw(dirfd int, name string, st *unix.Stat_t) error { return lstatAt(dirfd, name, st) }
