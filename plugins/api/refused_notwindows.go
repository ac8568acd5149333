//go:build !windows

package api

import (
	"errors"
	"syscall"
)

// IsRefused reports whether err means that nothing listens on the socket.
func IsRefused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED)
}
