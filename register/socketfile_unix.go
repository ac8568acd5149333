//go:build unix

package register

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// socketFile returns the identity and owner of the socket file at path,
// without following a symlink: anything but a socket there is an error.
func socketFile(path string) (socketStat, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return socketStat{}, err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return socketStat{}, fmt.Errorf("%w (mode %v)", errNotSocket, fi.Mode())
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return socketStat{}, fmt.Errorf("no stat data for %s", path)
	}
	return socketStat{dev: uint64(st.Dev), ino: uint64(st.Ino), uid: st.Uid, hasUID: true}, nil
}
