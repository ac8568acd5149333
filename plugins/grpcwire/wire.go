package grpcwire

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// CheckResponseHeaders checks the first HEADERS of a reply: HTTP status 200
// and a gRPC content type, or else the status gRPC maps the HTTP status to.
func CheckResponseHeaders(f *http2.MetaHeadersFrame) error {
	code := f.PseudoValue("status")
	if code != "200" {
		return status.Errorf(httpCode(code), "unexpected HTTP status code received from server: %s", code)
	}
	if ct := Field(f, "content-type"); ct != "application/grpc" && !strings.HasPrefix(ct, "application/grpc+") && !strings.HasPrefix(ct, "application/grpc;") {
		return status.Errorf(codes.Unknown, "unexpected content-type %q in the reply", ct)
	}
	return nil
}

// TrailerStatus returns the call's status from its trailers: nil for OK.
func TrailerStatus(f *http2.MetaHeadersFrame) error {
	v := Field(f, "grpc-status")
	if v == "" {
		return status.Error(codes.Internal, "grpc: the reply's trailers lack grpc-status")
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return status.Errorf(codes.Internal, "grpc: malformed grpc-status %q", v)
	}
	if n == 0 {
		return nil
	}
	return status.Error(codes.Code(n), decodeMessage(Field(f, "grpc-message")))
}

// Field returns the value of the regular header field name, or "".
func Field(f *http2.MetaHeadersFrame, name string) string {
	for _, hf := range f.RegularFields() {
		if hf.Name == name {
			return hf.Value
		}
	}
	return ""
}

// decodeMessage undoes the percent-encoding of grpc-message; a malformed
// one is kept as it came.
func decodeMessage(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	if d, err := url.PathUnescape(s); err == nil {
		return d
	}
	return s
}

// Timeout formats d as a grpc-timeout header value: at most 8 digits
// and a unit, never less than d.
func Timeout(d time.Duration) string {
	if d <= 0 {
		return "1n"
	}
	for _, u := range []struct {
		d    time.Duration
		unit string
	}{{time.Nanosecond, "n"}, {time.Microsecond, "u"}, {time.Millisecond, "m"}, {time.Second, "S"}, {time.Minute, "M"}, {time.Hour, "H"}} {
		if v := (d + u.d - 1) / u.d; v < 1e8 {
			return strconv.FormatInt(int64(v), 10) + u.unit
		}
	}
	return "99999999H"
}

// httpCode maps an HTTP status to a gRPC code as grpc-go does.
func httpCode(s string) codes.Code {
	switch s {
	case "400":
		return codes.Internal
	case "401":
		return codes.Unauthenticated
	case "403":
		return codes.PermissionDenied
	case "404":
		return codes.Unimplemented
	case "429", "502", "503", "504":
		return codes.Unavailable
	}
	return codes.Unknown
}

// rstCode maps an RST_STREAM error code to a gRPC code as grpc-go's
// http2ErrConvTab does: a code HTTP/2 does not define is Unknown.
func rstCode(e http2.ErrCode) codes.Code {
	switch e {
	case http2.ErrCodeRefusedStream:
		return codes.Unavailable
	case http2.ErrCodeCancel:
		return codes.Canceled
	case http2.ErrCodeFlowControl, http2.ErrCodeEnhanceYourCalm:
		return codes.ResourceExhausted
	case http2.ErrCodeInadequateSecurity:
		return codes.PermissionDenied
	}
	if e > http2.ErrCodeHTTP11Required {
		return codes.Unknown
	}
	return codes.Internal
}

// ResetCode returns the code of a call whose stream the server reset with
// e: rstCode's, except that a CANCEL that comes once the call's deadline
// due (zero: none) has passed is DeadlineExceeded, as grpc-go's client has
// it. A grpc-go server cancels a call so when the deadline the client sent
// it (grpc-timeout, never less than the time left) passes, and its reset
// can come in before the client's own deadline ends the call.
func ResetCode(e http2.ErrCode, due time.Time) codes.Code {
	code := rstCode(e)
	if code == codes.Canceled && !due.IsZero() && !time.Now().Before(due) {
		return codes.DeadlineExceeded
	}
	return code
}
