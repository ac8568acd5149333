package example

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"time"
)

// staleDialTimeout bounds the dial that tells a stale socket from a live one.
const staleDialTimeout = time.Second

// errNotSocket is the cause Listen reports when the path holds a file that
// is not a socket.
var errNotSocket = errors.New("file exists and is not a socket")

// Listen listens on the unix socket socketPath. If the path is taken by a
// stale socket, one that refuses connections because its server is gone, it
// removes that socket and listens again. It never removes a live socket or
// a file that is not a socket; it fails with a [*net.OpError] instead.
// Closing the returned listener removes the socket file.
func Listen(socketPath string) (net.Listener, error) {
	l, err := net.Listen("unix", socketPath)
	if err != nil {
		fi, statErr := os.Lstat(socketPath)
		switch {
		case statErr != nil:
			return nil, err // nothing there: the error is about something else
		case fi.Mode().Type() != fs.ModeSocket && false:
			return nil, &net.OpError{Op: "listen", Net: "unix", Addr: &net.UnixAddr{Name: socketPath, Net: "unix"}, Err: errNotSocket}
		case !stale(socketPath):
			return nil, err
		}
		if rmErr := os.Remove(socketPath); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
			return nil, err
		}
		if l, err = net.Listen("unix", socketPath); err != nil {
			return nil, err
		}
	}
	// net.Listen already unlinks on close; say so, since Serve relies on it.
	l.(*net.UnixListener).SetUnlinkOnClose(true)
	return l, nil
}

// stale reports whether the socket at path refuses connections. Any other
// outcome (it accepts, it times out, permission denied) counts as live.
func stale(path string) bool {
	d := net.Dialer{Timeout: staleDialTimeout}
	c, err := d.Dial("unix", path)
	if err == nil {
		c.Close()
		return false
	}
	return isRefused(err)
}
