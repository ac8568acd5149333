package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/windows"
)

// errNoAFUnix is what the agent says on a Windows without AF_UNIX sockets.
var errNoAFUnix = errors.New("this Windows has no AF_UNIX sockets (needs Windows 10 1803 / Server 2019 or later)")

// probeAFUnix checks that this system can create unix-domain sockets, so
// that the agent fails at start with a clear message where it cannot
// (Windows Server 2016 and older, and wine), instead of with a winsock
// error number. It binds a socket under the parent of the plugin directory
// dir, or os.TempDir() if that does not exist, and removes it again.
//
// Only a missing address family (WSAEAFNOSUPPORT) is an error: a bind that
// fails for another reason (a long path, no write access) has shown that
// the system has AF_UNIX sockets, and the agent's own listen reports any
// real problem with more context.
func probeAFUnix(dir string) error {
	parent := filepath.Dir(dir)
	if fi, err := os.Stat(parent); err != nil || !fi.IsDir() {
		parent = os.TempDir()
	}
	l, err := net.Listen("unix", filepath.Join(parent, fmt.Sprintf(".plugreg-probe-%d.sock", os.Getpid())))
	if errors.Is(err, windows.WSAEAFNOSUPPORT) {
		return errNoAFUnix
	}
	if err == nil {
		l.Close() // removes the socket file
	}
	return nil
}
