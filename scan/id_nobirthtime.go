//go:build unix && !darwin && !freebsd && !netbsd

package scan

import "golang.org/x/sys/unix"

// statID returns the ID in st. Struct stat has no birth time here (Linux,
// OpenBSD, DragonFly, illumos, Solaris, AIX), so Birth stays 0.
//
// Linux's statx does return a birth time where the file system records one,
// but it costs more than fstatat and adds nothing: a socket bound again gets
// a new inode, whose ctime is its creation time, as its birth time would be.
func statID(st *unix.Stat_t) ID {
	return ID{
		Dev:   uint64(st.Dev),
		Ino:   uint64(st.Ino),
		Mtime: st.Mtim.Nano(),
		Ctime: st.Ctim.Nano(),
	}
}
