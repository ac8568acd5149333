//go:build !linux && !freebsd && !darwin && !windows

package main

import "runtime"

// hostInitSystem returns a usage error: `plugreg service` knows only
// systemd, FreeBSD's rc.d, launchd and the Windows service manager.
func hostInitSystem() (initSystem, error) {
	return initSystem{}, usagef("service: not supported on %s; run 'plugreg run [flags]' from the init system instead", runtime.GOOS)
}
