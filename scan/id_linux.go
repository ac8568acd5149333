package scan

import "golang.org/x/sys/unix"

// statter stats sockets with statx, which also returns the birth time where
// the file system records it, and falls back to fstatat for good when statx
// is unavailable (Linux before 4.11, or blocked by a seccomp filter).
type statter struct {
	noStatx bool
}

// entryID returns the ID of the socket called name in the directory dirfd,
// without following a symlink. If name is no longer a socket it returns
// ENOENT, as if it were gone.
func (st *statter) entryID(dirfd int, name string) (ID, error) {
	if !st.noStatx {
		var sx unix.Statx_t
		const mask = unix.STATX_TYPE | unix.STATX_INO | unix.STATX_MTIME | unix.STATX_CTIME | unix.STATX_BTIME
		err := unix.Statx(dirfd, name, unix.AT_SYMLINK_NOFOLLOW, mask, &sx)
		switch err {
		case nil:
			if sx.Mode&unix.S_IFMT != unix.S_IFSOCK {
				return ID{}, unix.ENOENT
			}
			id := ID{
				Dev:   unix.Mkdev(sx.Dev_major, sx.Dev_minor),
				Ino:   sx.Ino,
				Mtime: statxNano(sx.Mtime),
				Ctime: statxNano(sx.Ctime),
			}
			if sx.Mask&unix.STATX_BTIME != 0 {
				id.Birth = statxNano(sx.Btime)
			}
			return id, nil
		case unix.ENOSYS, unix.EPERM:
			st.noStatx = true
		default:
			return ID{}, err
		}
	}
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
	}, nil
}

func statxNano(t unix.StatxTimestamp) int64 {
	return t.Sec*1e9 + int64(t.Nsec)
}
