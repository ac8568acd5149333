//go:build unix

package scan

import (
	"io/fs"

	"golang.org/x/sys/unix"
)

// StatSocket returns the ID and owner of the socket file at path, without
// following a symlink, taken as a Scan takes a socket's ID: by the one
// system call of lstatAt. A caller that compares the ID with one a Scan
// returned therefore compares like with like on every platform, including
// those where lstat and fstatat report times differently (qemu-user's
// linux/s390x lstat drops the nanoseconds). Anything but a socket at path
// is a *NotSocketError. It allocates nothing unless it fails.
func StatSocket(path string) (SocketFile, error) { return statSocket(path, false) }

// StatSocketRaw is StatSocket made with a raw system call where there is
// one (Linux), which the Go runtime does not see, so that it wakes none of
// the runtime's threads (see the package documentation). A raw call holds
// its thread and the runtime's P until it returns: only for a path no
// lookup of which can hang (Scanner.Settled).
func StatSocketRaw(path string) (SocketFile, error) { return statSocket(path, true) }

// statSocket is StatSocket, made with lstatAtRaw if raw.
func statSocket(path string, raw bool) (SocketFile, error) {
	var st unix.Stat_t
	var err error
	if raw { // direct calls, through which st does not escape
		err = lstatAtRaw(unix.AT_FDCWD, path, &st)
	} else {
		err = lstatAt(unix.AT_FDCWD, path, &st)
	}
	if err != nil {
		return SocketFile{}, &fs.PathError{Op: "fstatat", Path: path, Err: err}
	}
	if uint32(st.Mode)&unix.S_IFMT != unix.S_IFSOCK {
		return SocketFile{}, &NotSocketError{Path: path, Mode: fileMode(uint32(st.Mode))}
	}
	return SocketFile{ID: statID(&st), UID: st.Uid, HasUID: true}, nil
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
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	}
	return mode
}
