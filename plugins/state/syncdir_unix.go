//go:build unix

package state

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// syncDir flushes the directory dir to disk, so that a rename in it
// survives a crash. File systems that cannot sync a directory (EINVAL,
// ENOTSUP) are not an error.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOTSUP) {
		return err
	}
	return nil
}
