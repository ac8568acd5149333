package metrics

import (
	"bytes"
	"errors"
	"strings"
)

// request is what the server reads of an HTTP/1.x request: its line and
// the header fields it acts on.
type request struct {
	method, target string
	http11         bool // HTTP/1.1; else HTTP/1.0
	close          bool // the connection closes after the response
	hasBody        bool // a Content-Length above 0, or a Transfer-Encoding
}

// requestError is a request the server refuses, with the status code and
// the reason it answers.
type requestError struct {
	code   int
	reason string
}

func (e *requestError) Error() string { return e.reason }

func badRequest(reason string) error { return &requestError{code: 400, reason: reason} }

// headEnd returns the length of the request head at the start of b, up to
// and including the empty line that ends it, or -1 if b holds no empty
// line. Lines end in CRLF or LF. The search starts at from, an offset
// that an earlier call on a prefix of b returned -1 for.
func headEnd(b []byte, from int) int {
	for i := max(from-2, 0); ; {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return -1
		}
		i += j + 1
		switch {
		case i < len(b) && b[i] == '\n':
			return i + 1
		case i+1 < len(b) && b[i] == '\r' && b[i+1] == '\n':
			return i + 2
		}
	}
}

// parseRequest parses head, a request line and header lines each ending
// in CRLF or LF, then an empty line. The request line must be "METHOD
// /path HTTP/1.n" with single spaces and an origin-form target, whose
// path has only well-formed %XX escapes; a header
// line must be "Name: value", with no folding. HTTP/1.1 requires one Host
// field. The error is a *requestError.
func parseRequest(head []byte) (request, error) {
	line, rest, _ := bytes.Cut(head, []byte("\n"))
	var r request
	if err := r.parseLine(bytes.TrimSuffix(line, []byte("\r"))); err != nil {
		return r, err
	}
	var seen seenFields
	for {
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok || len(name) == 0 || !isToken(name) {
			return r, badRequest("malformed header line")
		}
		value = bytes.Trim(value, " \t")
		for _, c := range value {
			if c < ' ' && c != '\t' || c == 0x7f {
				return r, badRequest("invalid header field value")
			}
		}
		if err := r.field(string(name), value, &seen); err != nil {
			return r, err
		}
	}
	if r.http11 && seen.hosts == 0 {
		return r, badRequest("missing required Host header")
	}
	r.close = r.close || !r.http11 && !seen.keepAlive
	return r, nil
}

// parseLine parses the request line.
func (r *request) parseLine(line []byte) error {
	method, rest, ok1 := bytes.Cut(line, []byte(" "))
	target, version, ok2 := bytes.Cut(rest, []byte(" "))
	if !ok1 || !ok2 || !isToken(method) {
		return badRequest("malformed request line")
	}
	if len(target) == 0 || target[0] != '/' {
		return badRequest("request target not a path")
	}
	for _, c := range target {
		if c <= ' ' || c == 0x7f {
			return badRequest("malformed request line")
		}
	}
	path, _, _ := bytes.Cut(target, []byte("?"))
	for i, c := range path {
		if c == '%' && (i+2 >= len(path) || !isHex(path[i+1]) || !isHex(path[i+2])) {
			return badRequest("invalid escape in request path")
		}
	}
	v, ok := bytes.CutPrefix(version, []byte("HTTP/"))
	if !ok || len(v) != 3 || !isDigit(v[0]) || v[1] != '.' || !isDigit(v[2]) {
		return badRequest("malformed HTTP version")
	}
	if v[0] != '1' {
		return &requestError{code: 505, reason: "unsupported protocol version"}
	}
	r.http11 = v[2] != '0' // HTTP/1.2 and on are served as HTTP/1.1
	r.method, r.target = string(method), string(target)
	return nil
}

// seenFields is what parseRequest notes of the header fields it has read.
type seenFields struct {
	hosts     int  // Host fields
	keepAlive bool // a "Connection: keep-alive"
}

// field takes in the header field name: value.
func (r *request) field(name string, value []byte, seen *seenFields) error {
	switch {
	case strings.EqualFold(name, "Host"):
		if seen.hosts++; seen.hosts > 1 {
			return badRequest("too many Host headers")
		}
	case strings.EqualFold(name, "Connection"):
		for tok := range strings.SplitSeq(string(value), ",") {
			switch tok = strings.Trim(tok, " \t"); {
			case strings.EqualFold(tok, "close"):
				r.close = true
			case strings.EqualFold(tok, "keep-alive"):
				seen.keepAlive = true
			}
		}
	case strings.EqualFold(name, "Content-Length"):
		if len(value) == 0 {
			return badRequest("bad Content-Length")
		}
		for _, c := range value {
			if c < '0' || c > '9' {
				return badRequest("bad Content-Length")
			}
			r.hasBody = r.hasBody || c != '0'
		}
	case strings.EqualFold(name, "Transfer-Encoding"):
		r.hasBody = true
	}
	return nil
}

// errHeadTooLarge is a request whose head is longer than the server's
// MaxHeaderBytes.
var errHeadTooLarge = errors.New("request header too large")

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isHex(c byte) bool { return isDigit(c) || 'a' <= c|0x20 && c|0x20 <= 'f' }

// isToken reports whether b is an RFC 9110 token: one or more of
// the visible ASCII characters other than the delimiters.
func isToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
