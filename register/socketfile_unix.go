//go:build unix

package register

import (
	"fmt"
	"io/fs"
	"os"

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
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		mode := "unknown"
		if fi, err := os.Lstat(path); err == nil {
			mode = fi.Mode().String()
		}
		return socketStat{}, fmt.Errorf("%w (mode %s)", errNotSocket, mode)
	}
	return socketStat{dev: uint64(st.Dev), ino: uint64(st.Ino), uid: st.Uid, hasUID: true}, nil
}

// is reports whether the file is the one the scanner saw as id.
func (s socketStat) is(id scan.ID) bool { return s.dev == id.Dev && s.ino == id.Ino }
