//go:build !unix

package register

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/plugreg/plugreg/scan"
)

// socketFile checks that the file at path is a socket, without following a
// symlink. Its identity is not compared here (os.SameFile would have to
// open the socket's reparse point), and it has no owner uid.
func socketFile(path string) (socketStat, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return socketStat{}, err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return socketStat{}, fmt.Errorf("%w (mode %v)", errNotSocket, fi.Mode())
	}
	return socketStat{}, nil
}

// realDir checks that path is a directory itself, not a symlink or a
// junction to one.
func realDir(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	switch fi.Mode().Type() {
	case fs.ModeDir:
		return nil
	case fs.ModeSymlink, fs.ModeIrregular: // a junction is irregular
		return fmt.Errorf("%w: %s", errSymlinked, path)
	}
	return &fs.PathError{Op: "lstat", Path: path, Err: syscall.ENOTDIR}
}

// is reports true: socketFile does not read a file's identity here, and
// the scan, which does, sees a socket replaced.
func (s socketStat) is(scan.ID) bool { return true }
