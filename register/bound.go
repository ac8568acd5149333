package register

import "github.com/plugreg/plugreg/plugins"

// errText is err's text for a log line, bounded (plugins.BoundText): it
// may hold what a plugin sent (a gRPC status message, GOAWAY debug data).
func errText(err error) string { return plugins.BoundText(err.Error()) }
