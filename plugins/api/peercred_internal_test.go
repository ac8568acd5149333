package api

import (
	"context"
	"errors"
	"net"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/plugreg/plugreg/plugins"
)

// nopRegistrar is a Registrar that is never called.
type nopRegistrar struct{}

func (nopRegistrar) RegisterPlugin(context.Context, plugins.Plugin, Caller) (plugins.Plugin, error) {
	return plugins.Plugin{}, errors.New("called")
}

func (nopRegistrar) DeregisterPlugin(context.Context, string, string, string, Caller) ([]plugins.Plugin, error) {
	return nil, errors.New("called")
}

// TestMayWrite decides on callers as the handshake describes them: one
// that cannot be told is refused with the reason, whatever the writers.
func TestMayWrite(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	pipe := identifyConn(a) // no file descriptor
	if pipe.err == nil {
		t.Fatalf("identifyConn(pipe) = %+v, want an error", pipe)
	}
	tests := []struct {
		name    string
		c       caller
		code    codes.Code
		message string
	}{
		{"unknown", pipe, codes.PermissionDenied, "permission denied: cannot tell who calls (peer credentials: *net.pipe has no file descriptor), so registration is refused"},
		{"unknown, with a uid", caller{uid: 7, hasUID: true, trusted: true, err: errors.New("SO_PEERCRED: bad")}, codes.PermissionDenied, "permission denied: cannot tell who calls (SO_PEERCRED: bad), so registration is refused"},
		{"trusted", caller{uid: 0, hasUID: true, trusted: true}, codes.OK, ""},
		{"a writer", caller{uid: 7, hasUID: true}, codes.OK, ""},
		{"another uid", caller{uid: 8, hasUID: true, who: "uid 8"}, codes.PermissionDenied, caller{uid: 8, who: "uid 8"}.denied()},
	}
	s := NewAPIServer(plugins.NewRegistry(), 0)
	s.EnableRegistration(nopRegistrar{}, []uint32{7})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := grpcpeer.NewContext(t.Context(), &grpcpeer.Peer{AuthInfo: peerAuth{CommonAuthInfo: credentials.CommonAuthInfo{}, c: tc.c}})
			err := s.mayWrite(ctx)
			if st := status.Convert(err); st.Code() != tc.code || st.Message() != tc.message {
				t.Errorf("mayWrite(%+v) = %v, want %v: %s", tc.c, err, tc.code, tc.message)
			}
		})
	}
}
