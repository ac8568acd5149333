//go:build !windows

package api

import "syscall"

// openFileLimit returns the agent's open-file limit (the soft
// RLIMIT_NOFILE), which the Go runtime raised to the hard one at start.
func openFileLimit() (uint64, bool) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, false
	}
	return uint64(l.Cur), true
}
