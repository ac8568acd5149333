//go:build !windows

package main

// serviceMain returns ok false: only Windows has a service manager that
// needs plugreg's help to run it.
func serviceMain([]string) (code int, ok bool) { return 0, false }
