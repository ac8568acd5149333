package sockettest

import (
	"errors"

	"golang.org/x/sys/windows"
)

// afUnixUnsupported reports whether err means the system has no AF_UNIX
// sockets (Windows before 10 1803, or wine).
func afUnixUnsupported(err error) bool {
	return errors.Is(err, windows.WSAEAFNOSUPPORT)
}
