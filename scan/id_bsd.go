//go:build darwin || freebsd || netbsd

package scan

import "golang.org/x/sys/unix"

// statter stats sockets with fstatat. These systems record a birth time in
// struct stat (st_birthtim); OpenBSD and DragonFly do not and use id_unix.go.
type statter struct{}

// entryID returns the ID of the socket called name in the directory dirfd,
// without following a symlink. If name is no longer a socket it returns
// ENOENT, as if it were gone.
func (*statter) entryID(dirfd int, name string) (ID, error) {
	var s unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &s, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return ID{}, err
	}
	if s.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return ID{}, unix.ENOENT
	}
	return ID{
		Dev:   uint64(s.Dev),
		Ino:   uint64(s.Ino),
		Mtime: s.Mtim.Nano(),
		Ctime: s.Ctim.Nano(),
		Birth: s.Btim.Nano(),
	}, nil
}
