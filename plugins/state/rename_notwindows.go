//go:build !windows

package state

import (
	"errors"
	"io/fs"
	"os"
)

// replaceFile renames oldpath to newpath, replacing newpath atomically.
func replaceFile(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

// renameNoReplace renames oldpath to newpath unless newpath exists, in
// which case the error matches fs.ErrExist. It links the new name, which
// fails if it exists, then removes the old one. File systems without hard
// links get a check then a rename, which a concurrent creator of newpath
// could slip between.
func renameNoReplace(oldpath, newpath string) error {
	err := os.Link(oldpath, newpath)
	if err == nil {
		return os.Remove(oldpath)
	}
	if errors.Is(err, fs.ErrExist) {
		return err
	}
	if _, err := os.Lstat(newpath); err == nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: fs.ErrExist}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.Rename(oldpath, newpath)
}
