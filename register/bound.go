package register

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/plugreg/plugreg/plugins"
)

// maxText bounds each piece of text a plugin chose (a name, a type, an
// endpoint, the message of an error it returned) wherever the agent puts
// it: a log line, an event, a message to the plugin.
const maxText = 512

// maxBoundedVersions bounds the versions kept of a plugin that reported
// invalid ones.
const maxBoundedVersions = 8

// cut returns s as valid UTF-8 of at most about maxText bytes: a longer s is
// cut at a character boundary and ends with its original length.
func cut(s string) string {
	if len(s) <= maxText && utf8.ValidString(s) {
		return s
	}
	n := len(s)
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxText {
		return s
	}
	end := maxText
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + "… (" + strconv.Itoa(n) + " bytes)"
}

// bounded returns p, which failed plugins.ValidateInfo, with each string
// cut and at most maxBoundedVersions versions, so that it can be logged and
// published as a rejected plugin.
func bounded(p plugins.Plugin) plugins.Plugin {
	p.Name, p.Type, p.Endpoint = cut(p.Name), cut(p.Type), cut(p.Endpoint)
	vs := p.Versions[:min(len(p.Versions), maxBoundedVersions)]
	p.Versions = make([]string, len(vs))
	for i, v := range vs {
		p.Versions[i] = cut(v)
	}
	return p
}

// errText is err's text for a log line, cut: it may hold what a plugin
// sent (a gRPC status message, GOAWAY debug data).
func errText(err error) string { return cut(err.Error()) }
