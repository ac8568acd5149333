//go:build !windows

package example

import (
	"errors"
	"syscall"
)

// isRefused reports whether err means that nothing listens on the socket.
func isRefused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED)
}
