package peer

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/windows"
)

// Supported is false: an AF_UNIX socket on Windows has no uid to tell.
// ProcessID tells the pid instead.
const Supported = false

// FromFD fails: an AF_UNIX socket on Windows has no uid to tell.
func FromFD(fd uintptr) (Cred, error) {
	return Cred{}, fmt.Errorf("peer credentials are not supported on windows")
}

// sioAFUnixGetPeerPID is SIO_AF_UNIX_GETPEERPID of <afunix.h>:
// _WSAIOR(IOC_VENDOR, 256).
const sioAFUnixGetPeerPID = 0x58000100

// ProcessID returns the pid of the process at the other end of the
// connected AF_UNIX socket fd, as of its connect or listen call
// (SIO_AF_UNIX_GETPEERPID, Windows 10 1803 and later).
func ProcessID(fd uintptr) (uint32, error) {
	var pid, n uint32
	err := windows.WSAIoctl(windows.Handle(fd), sioAFUnixGetPeerPID, nil, 0,
		(*byte)(unsafe.Pointer(&pid)), uint32(unsafe.Sizeof(pid)), &n, nil, 0)
	if err != nil {
		return 0, fmt.Errorf("SIO_AF_UNIX_GETPEERPID: %w", err)
	}
	if n != uint32(unsafe.Sizeof(pid)) || pid == 0 {
		return 0, fmt.Errorf("SIO_AF_UNIX_GETPEERPID: no pid (%d bytes, pid %d)", n, pid)
	}
	return pid, nil
}
