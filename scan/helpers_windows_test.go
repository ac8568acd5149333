package scan

import (
	"errors"

	"golang.org/x/sys/windows"
)

// makeSocketFile binds a socket at path and closes it; the file stays.
func makeSocketFile(path string) error {
	fd, err := windows.Socket(windows.AF_UNIX, windows.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	defer windows.Closesocket(fd)
	return windows.Bind(fd, &windows.SockaddrUnix{Name: path})
}

// bareScan is not written for Windows.
func bareScan(string) (int, error) {
	return 0, errors.ErrUnsupported
}
