package api

import (
	"errors"

	"golang.org/x/sys/windows"
)

// IsRefused reports whether err means that nothing listens on the socket.
// Winsock reports WSAECONNREFUSED, which syscall.ECONNREFUSED does not match.
func IsRefused(err error) bool {
	return errors.Is(err, windows.WSAECONNREFUSED)
}
