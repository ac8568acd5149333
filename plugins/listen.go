package plugins

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"
)

// ErrInUse is returned by ListenUnix when a live server already listens on
// the socket.
var ErrInUse = errors.New("plugins: socket in use")

// ListenUnix listens on a unix socket at path and sets its mode. Missing
// parent directories are created (0750). A socket file left behind by a
// process that died (dialling it is refused) is replaced; a live socket is
// not touched (ErrInUse), and neither is a file that is not a socket.
// Closing the listener removes the socket file.
func ListenUnix(path string, mode fs.FileMode) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&fs.ModeSocket == 0 {
			return nil, fmt.Errorf("listen %s: file exists and is not a socket", path)
		}
		conn, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			conn.Close()
			return nil, fmt.Errorf("listen %s: %w: another process is serving on it", path, ErrInUse)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	if err := os.Chmod(path, mode); err != nil {
		l.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	return l, nil
}

// ListenAPI listens on the agent's API socket, mode 0600: only the agent's
// user (root, as a rule) may list plugins.
func ListenAPI(path string) (net.Listener, error) { return ListenUnix(path, 0o600) }
