package register

import "github.com/plugreg/plugreg/plugins/rules"

// errText is err's text for a log line, bounded (rules.BoundText): it
// may hold what a plugin sent (a gRPC status message, GOAWAY debug data).
func errText(err error) string { return rules.BoundText(err.Error()) }
