//go:build unix

package register

import (
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"
)

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
