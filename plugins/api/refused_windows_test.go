package api

import (
	"net"
	"os"
	"testing"

	"golang.org/x/sys/windows"
)

func TestIsRefused(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connectex", windows.WSAECONNREFUSED)}, true},
		{&net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connectex", windows.WSAEACCES)}, false},
		{&net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connectex", windows.WSAETIMEDOUT)}, false},
	}
	for _, tc := range tests {
		if got := IsRefused(tc.err); got != tc.want {
			t.Errorf("IsRefused(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
