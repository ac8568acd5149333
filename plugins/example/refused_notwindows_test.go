//go:build !windows

package example

import (
	"net"
	"os"
	"syscall"
	"testing"
)

// afUnixUnsupported reports whether err means the system has no AF_UNIX
// sockets; every Unix has them.
func afUnixUnsupported(error) bool { return false }

func TestIsRefused(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, true},
		{&net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", syscall.EACCES)}, false},
		{&net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", syscall.EAGAIN)}, false},
	}
	for _, tc := range tests {
		if got := isRefused(tc.err); got != tc.want {
			t.Errorf("isRefused(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
