//go:build !unix

package register

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

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
