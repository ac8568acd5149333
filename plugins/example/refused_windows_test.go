package example

import (
	"errors"
	"net"
	"os"
	"testing"

	"golang.org/x/sys/windows"
)

// afUnixUnsupported reports whether err means the system has no AF_UNIX
// sockets (Windows before 10 1803, or wine).
func afUnixUnsupported(err error) bool {
	return errors.Is(err, windows.WSAEAFNOSUPPORT)
}

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
		if got := isRefused(tc.err); got != tc.want {
			t.Errorf("isRefused(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
