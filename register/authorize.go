package register

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strconv"
	"syscall"

	"github.com/plugreg/plugreg/plugins/peer"
	"github.com/plugreg/plugreg/statecache"
)

// havePeerCred: this OS tells who serves a socket.
const havePeerCred = peer.Supported

// authorize checks a connection to the socket at path against
// c.AllowUIDs: the socket file's owner and the serving process's uid must
// both be allowed. It returns a *notAllowedError when one is not, and any
// other error when the credentials cannot be read (a transient failure).
func (c *Client) authorize(path string, file socketStat, conn net.Conn) error {
	if !file.hasUID {
		return errNoOwnerUID
	}
	owner := file.uid
	var control func(func(fd uintptr)) error
	switch conn := conn.(type) {
	case interface{ control(func(fd uintptr)) error }: // a pacedConn
		control = conn.control
	case syscall.Conn:
		raw, err := conn.SyscallConn()
		if err != nil {
			return fmt.Errorf("peer credentials: %w", err)
		}
		control = raw.Control
	default:
		return fmt.Errorf("peer credentials: %T has no file descriptor", conn)
	}
	var p peer.Cred
	var credErr error
	if err := control(func(fd uintptr) { p, credErr = peer.FromFD(fd) }); err != nil {
		return fmt.Errorf("peer credentials: %w", err)
	}
	if credErr != nil {
		return credErr // it names the socket option
	}
	return c.allowed(owner, p)
}

// errNoOwnerUID refuses a socket under c.AllowUIDs where files have no
// owner uid.
var errNoOwnerUID = errors.New("socket owner: file owner uids are not supported on " + runtime.GOOS)

// allowed decides on the owner of a socket file and the process serving
// it, the owner first.
func (c *Client) allowed(owner uint32, p peer.Cred) error {
	if err := c.ownerAllowed(owner); err != nil {
		return err
	}
	if !slices.Contains(c.AllowUIDs, p.UID) {
		return &notAllowedError{who: "serving process", uid: p.UID, pid: p.PID}
	}
	return nil
}

// ownerAllowed decides on the owner of a socket file: a *notAllowedError
// unless c.AllowUIDs holds it.
func (c *Client) ownerAllowed(owner uint32) error {
	if !slices.Contains(c.AllowUIDs, owner) {
		return &notAllowedError{who: "socket owner", uid: owner}
	}
	return nil
}

// notAllowedError is a socket refused by Client.AllowUIDs. It matches
// statecache.ErrChanged, so that a plugin restored from the state file
// whose uid is no longer allowed is dropped as "no longer accepted".
type notAllowedError struct {
	who string // "socket owner" or "serving process"
	uid uint32
	pid int32 // the serving process; 0: unknown
}

func (e *notAllowedError) Error() string {
	s := e.who + " uid " + strconv.FormatUint(uint64(e.uid), 10)
	if e.pid > 0 {
		s += " (pid " + strconv.Itoa(int(e.pid)) + ")"
	}
	return s + " is not allowed"
}

// Is reports whether target is statecache.ErrChanged.
func (e *notAllowedError) Is(target error) bool { return target == statecache.ErrChanged }
