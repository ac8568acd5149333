package rules

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/plugreg/plugreg/scan"
)

// MaxText bounds each piece of text from a plugin or a handler that the
// agent shows but need not keep whole (the fields of a rejected plugin, an
// error message, a handler's refusal), in bytes; see [BoundText].
const MaxText = 512

// textFault returns what breaks the text rule in s, or nil: text from a
// plugin or a handler that the agent stores, logs or prints is valid
// UTF-8 with no control character (C0, DEL or C1: unicode.IsControl),
// so that it can move no terminal's cursor, break no line of a log or a
// table, and survive a round trip through JSON and protobuf. The
// validators refuse text that breaks it (prefixing the error with what
// the text is), and BoundText repairs it.
func textFault(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("is not valid UTF-8")
	}
	for i, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("contains control character %U at byte %d", r, i)
		}
	}
	return nil
}

// BoundText returns s, text from a plugin or a handler, made safe to
// store, log and print: it keeps the text rule (valid UTF-8, no control
// character) and is at most MaxText bytes. Each invalid byte sequence
// becomes U+FFFD and each control character a space, and a longer s is
// cut at a character boundary and ends with its original length, "… (N
// bytes)". Text that keeps the rule within the bound is returned as it is,
// so BoundText of its own result changes nothing. It is the one cutter of
// such text: the agent's logs, events, status, API errors, messages to
// plugins and handler errors all bound their text with it.
func BoundText(s string) string {
	if len(s) <= MaxText && textFault(s) == nil {
		return s
	}
	n := len(s)
	s = strings.Map(spaceControl, strings.ToValidUTF8(s, "\uFFFD"))
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

// spaceControl returns a space for a control character, else r; for
// strings.Map.
func spaceControl(r rune) rune {
	if unicode.IsControl(r) {
		return ' '
	}
	return r
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
