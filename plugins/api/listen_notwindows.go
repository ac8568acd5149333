//go:build !windows

package api

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
)

// ListenAPI listens on the agent's API socket (see [ListenUnix]).
//
// With group "", the socket's mode is 0600: only the agent's user (root, as
// a rule) may use the API. Otherwise the socket's group becomes group, a
// group name or a numeric GID (used as is, so it needs no /etc/group, as in a
// scratch container), and its mode 0660, so that the group's members may
// use the API too. The directories that ListenAPI creates for the socket
// then get mode 0750 and the same group, so that the members can reach it;
// existing directories are left alone. An unknown group is an error, and
// then nothing is created.
func ListenAPI(path, group string) (net.Listener, error) {
	if group == "" {
		return ListenUnix(path, 0o600)
	}
	gid, err := lookupGID(group)
	if err != nil {
		return nil, err
	}
	if err := mkdirGroup(filepath.Dir(path), gid); err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	l, err := ListenUnix(path, 0o600)
	if err != nil {
		return nil, err
	}
	if err := os.Chown(path, -1, gid); err != nil {
		l.Close()
		return nil, fmt.Errorf("chown %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		l.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	return l, nil
}

// lookupGID returns the GID of group: a number as is, else the GID of the
// group of that name.
func lookupGID(group string) (int, error) {
	if n, err := strconv.ParseUint(group, 10, 31); err == nil {
		return int(n), nil
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		if errors.As(err, new(user.UnknownGroupError)) {
			return 0, fmt.Errorf("api socket group %q: no such group", group)
		}
		return 0, fmt.Errorf("api socket group %q: %w", group, err)
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil {
		return 0, fmt.Errorf("api socket group %q: GID %q is not a number", group, g.Gid)
	}
	return gid, nil
}

// mkdirGroup creates dir and its missing parents with mode 0750 and the
// group gid. It leaves existing directories alone.
func mkdirGroup(dir string, gid int) error {
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		return nil // it exists, or ListenUnix reports why it cannot be used
	}
	if err := mkdirGroup(filepath.Dir(dir), gid); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o750); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil // created meanwhile by someone else: theirs
		}
		return err
	}
	return os.Chown(dir, -1, gid)
}

// noAFUnix returns nil: every system but Windows has AF_UNIX sockets.
func noAFUnix(error) error { return nil }
