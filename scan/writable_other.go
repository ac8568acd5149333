//go:build !unix

package scan

import "log/slog"

// warnWritable does nothing: the plugin directories' access rights are
// ACLs here, not group and other permission bits.
func warnWritable(*slog.Logger, string) {}
