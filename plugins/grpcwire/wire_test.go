package grpcwire

import (
	"testing"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
)

// TestRSTCode: the code of each RST_STREAM error code is grpc-go's.
func TestRSTCode(t *testing.T) {
	for _, tc := range []struct {
		e    http2.ErrCode
		want codes.Code
	}{ // grpc-go's http2ErrConvTab, and Unknown for a code outside it
		{http2.ErrCodeNo, codes.Internal},
		{http2.ErrCodeProtocol, codes.Internal},
		{http2.ErrCodeInternal, codes.Internal},
		{http2.ErrCodeFlowControl, codes.ResourceExhausted},
		{http2.ErrCodeSettingsTimeout, codes.Internal},
		{http2.ErrCodeStreamClosed, codes.Internal},
		{http2.ErrCodeFrameSize, codes.Internal},
		{http2.ErrCodeRefusedStream, codes.Unavailable},
		{http2.ErrCodeCancel, codes.Canceled},
		{http2.ErrCodeCompression, codes.Internal},
		{http2.ErrCodeConnect, codes.Internal},
		{http2.ErrCodeEnhanceYourCalm, codes.ResourceExhausted},
		{http2.ErrCodeInadequateSecurity, codes.PermissionDenied},
		{http2.ErrCodeHTTP11Required, codes.Internal},
		{http2.ErrCodeHTTP11Required + 1, codes.Unknown},
		{0xffffffff, codes.Unknown},
	} {
		if got := rstCode(tc.e); got != tc.want {
			t.Errorf("rstCode(%v) = %v, want %v", tc.e, got, tc.want)
		}
	}
}
