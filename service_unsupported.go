//go:build !linux && !freebsd && !darwin && !windows

package main

import (
	"context"
	"io"
	"runtime"
)

// runService is `plugreg service`, which plugreg has only for systemd,
// FreeBSD's rc.d, launchd and the Windows service manager.
func runService(context.Context, []string, io.Writer, io.Writer) error {
	return usagef("service: not supported on %s; run 'plugreg run [flags]' from the init system instead", runtime.GOOS)
}
