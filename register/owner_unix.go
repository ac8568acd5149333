//go:build unix

package register

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// socketOwner returns the uid that owns the socket file at path, without
// following a symlink.
func socketOwner(path string) (uint32, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0, err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return 0, fmt.Errorf("socket owner: %s is no longer a socket (mode %v)", path, fi.Mode())
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("socket owner: no stat data for %s", path)
	}
	return st.Uid, nil
}
