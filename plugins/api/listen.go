package api

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Errors of ListenUnix, for a plugin (such as plugins/example) to tell why
// it cannot serve.
var (
	// ErrInUse: a live server already listens on the socket.
	ErrInUse = errors.New("api: socket in use")
	// ErrNotSocket: the path holds a file that is not a socket.
	ErrNotSocket = errors.New("api: file exists and is not a socket")
)

// staleDialTimeout bounds the dial that tells a stale socket from a live one.
const staleDialTimeout = time.Second

// maxSocketPath is the longest socket path, in bytes, that this OS can bind:
// sun_path less its terminating NUL (107 on Linux and Windows, 103 on the
// BSDs and macOS).
const maxSocketPath = len(syscall.RawSockaddrUnix{}.Path) - 1

// ListenUnix listens on a unix socket at path and, unless mode is 0, sets
// its mode. Missing parent directories are created (0750). A socket file
// left behind by a process that died (dialling it is refused) is replaced;
// a live socket is left alone (ErrInUse), and so is a file that is not a
// socket (ErrNotSocket). Closing the listener removes the socket file. On a
// Windows without AF_UNIX sockets, the error says so.
// A path longer than the OS's sun_path limit is refused before anything is
// created.
func ListenUnix(path string, mode fs.FileMode) (net.Listener, error) {
	if n := len(path); n > maxSocketPath {
		return nil, fmt.Errorf("listen %s: socket path is %d bytes, longer than the %d-byte limit of this OS (sun_path)", path, n, maxSocketPath)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		fi, statErr := os.Lstat(path)
		switch {
		case statErr != nil: // nothing there: the error is about something else
			if e := noAFUnix(err); e != nil {
				return nil, fmt.Errorf("listen %s: %w", path, e)
			}
			return nil, err
		case fi.Mode().Type() != fs.ModeSocket:
			return nil, fmt.Errorf("listen %s: %w", path, ErrNotSocket)
		case !stale(path):
			return nil, fmt.Errorf("listen %s: %w: another process is serving on it", path, ErrInUse)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
		}
		if l, err = net.Listen("unix", path); err != nil {
			return nil, err
		}
	}
	l.(*net.UnixListener).SetUnlinkOnClose(true)
	if mode != 0 {
		if err := os.Chmod(path, mode); err != nil {
			l.Close()
			return nil, fmt.Errorf("chmod %s: %w", path, err)
		}
	}
	return l, nil
}

// stale reports whether the socket at path refuses connections. Any other
// outcome (it accepts, it times out, permission denied) counts as live.
func stale(path string) bool {
	c, err := net.DialTimeout("unix", path, staleDialTimeout)
	if err == nil {
		c.Close()
		return false
	}
	return IsRefused(err)
}
