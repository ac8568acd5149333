//go:build !windows

package api

import (
	"net"
	"os"
	"syscall"
	"testing"
)

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
		if got := IsRefused(tc.err); got != tc.want {
			t.Errorf("IsRefused(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
