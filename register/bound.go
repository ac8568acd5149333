package register

import "github.com/plugreg/plugreg/plugins"

// cut bounds a piece of text a plugin chose (a name, a type, an endpoint,
// the message of an error it returned) wherever the agent puts it: a log
// line, an event, a message to the plugin. See plugins.BoundText.
func cut(s string) string { return plugins.BoundText(s) }

// bounded returns p, which failed plugins.ValidateInfo, bounded so that it
// can be logged and published as a rejected plugin: see plugins.BoundPlugin.
func bounded(p plugins.Plugin) plugins.Plugin { return plugins.BoundPlugin(p) }

// errText is err's text for a log line, cut: it may hold what a plugin
// sent (a gRPC status message, GOAWAY debug data).
func errText(err error) string { return cut(err.Error()) }
