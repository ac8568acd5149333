//go:build unix

package scan

import (
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// makeSocketFile binds a socket at path and closes it; the file stays.
func makeSocketFile(path string) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Bind(fd, &unix.SockaddrUnix{Name: path})
}

// bareScan is the least a scan can do: read every directory under root once
// and fstatat each socket in it. It returns the number of sockets.
func bareScan(root string) (int, error) {
	f, err := os.Open(root)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return 0, err
	}
	fd := int(f.Fd())
	n := 0
	for _, e := range ents {
		switch {
		case e.IsDir():
			m, err := bareScan(filepath.Join(root, e.Name()))
			if err != nil {
				return n, err
			}
			n += m
		case e.Type()&fs.ModeSocket != 0:
			var st unix.Stat_t
			if err := unix.Fstatat(fd, e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}
