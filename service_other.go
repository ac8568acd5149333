//go:build !windows

package main

import (
	"context"
	"io"
)

// serviceMain returns ok false: only Windows has a service manager that
// needs plugreg's help to run it.
func serviceMain([]string) (code int, ok bool) { return 0, false }

// runService is `plugreg service`, which only Windows has.
func runService(context.Context, []string, io.Writer, io.Writer) error {
	return usagef("service: only on Windows; see the README for systemd, rc.d and launchd")
}
