package rules

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/plugreg/plugreg/scan"
)

// MaxText bounds each piece of text from a plugin or a handler that the
// agent shows but need not keep whole (the fields of a rejected plugin, an
// error message), in bytes; see [BoundText].
const MaxText = 512

// BoundText returns s as valid UTF-8 of at most MaxText bytes: each
// invalid byte sequence becomes U+FFFD, and a longer s is cut at a
// character boundary and ends with its original length, "… (N bytes)".
// Valid text within the bound is returned as it is, so BoundText of its
// own result changes nothing.
func BoundText(s string) string {
	if len(s) <= MaxText && utf8.ValidString(s) {
		return s
	}
	n := len(s)
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxText {
		return s
	}
	mark := "… (" + strconv.Itoa(n) + " bytes)"
	end := MaxText - len(mark)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + mark
}

// The state file's size bound. Every record of a registered plugin or a
// pending deregistration keeps the limits of [ValidateInfo],
// [ValidateAnnotations] and [scan.MaxSocketPath], and JSON at most doubles
// text without control characters (a quote or a backslash gets a
// backslash; the socket path alone may hold control characters, six bytes
// each), so one record takes at most MaxRecordBytes. TestMaxRecordBytes
// (package plugins/state) encodes the largest record there is.
const (
	// MaxRecordBytes bounds one record of the state file, in bytes: of a
	// discovered plugin or of one registered through the API, the larger.
	MaxRecordBytes = max(socketRecordBytes, apiRecordBytes)
	// infoRecordBytes bounds what both kinds of records hold.
	infoRecordBytes = 2*(maxTypeBytes+maxNameBytes+MaxVersions*MaxVersionBytes+MaxAnnotationBytes) +
		16*MaxVersions + 16*MaxAnnotations + recordOverhead
	// socketRecordBytes bounds the record of a discovered plugin.
	socketRecordBytes = infoRecordBytes + 2*MaxEndpointBytes + 6*scan.MaxSocketPath
	// apiRecordBytes bounds the record of an API plugin: its endpoint is a
	// path of at most scan.MaxSocketPath bytes, and it has an owner and
	// options.
	apiRecordBytes = infoRecordBytes + 2*scan.MaxSocketPath + 2*(MaxOwnerBytes+MaxAnnotationBytes) + 16*MaxAnnotations
	// recordOverhead is the rest of a record: field names, indentation,
	// the socket's identity, the time, the reason, the source and no-check.
	recordOverhead = 1024
)
