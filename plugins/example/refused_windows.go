package example

import (
	"errors"

	"golang.org/x/sys/windows"
)

// isRefused reports whether err means that nothing listens on the socket.
// Winsock reports WSAECONNREFUSED, which syscall.ECONNREFUSED does not match.
func isRefused(err error) bool {
	return errors.Is(err, windows.WSAECONNREFUSED)
}
