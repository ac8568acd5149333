//go:build unix

package register

import (
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"

	"github.com/plugreg/plugreg/scan"
)

// socketFile returns the identity and owner of the socket file at path,
// without following a symlink: anything but a socket there is an error.
// It allocates nothing unless it fails: it runs for every liveness check.
func socketFile(path string) (socketStat, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return socketStat{}, &fs.PathError{Op: "lstat", Path: path, Err: err}
	}
	if uint32(st.Mode)&unix.S_IFMT != unix.S_IFSOCK {
		return socketStat{}, fmt.Errorf("%w (mode %v)", errNotSocket, fileMode(uint32(st.Mode)))
	}
	return socketStat{id: scan.StatID(&st), uid: st.Uid, hasUID: true}, nil
}

// realDir checks that path is a directory itself, not a symlink to one.
func realDir(path string) error {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return &fs.PathError{Op: "lstat", Path: path, Err: err}
	}
	switch uint32(st.Mode) & unix.S_IFMT {
	case unix.S_IFDIR:
		return nil
	case unix.S_IFLNK:
		return fmt.Errorf("%w: %s", errSymlinked, path)
	}
	return &fs.PathError{Op: "lstat", Path: path, Err: unix.ENOTDIR}
}

// fileMode is the fs.FileMode of a unix mode, for messages: its type and
// permission bits.
func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	}
	return mode
}

// is reports whether the file is the one the scanner saw as id: the same
// device, inode and times (a socket bound again at a path may get the old
// one's inode, but not its times).
func (s socketStat) is(id scan.ID) bool { return s.id == id }
