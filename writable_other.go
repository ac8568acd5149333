//go:build !unix

package main

import "log/slog"

// warnWritableDirs does nothing: the plugin directories' access rights are
// ACLs here, not group and other permission bits.
func warnWritableDirs(log *slog.Logger, dirs []string) {}
