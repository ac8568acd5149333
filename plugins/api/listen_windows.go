package api

import (
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/windows"
)

// adminsOnly is the DACL of the API socket: full access for the
// Administrators group (BA) and SYSTEM (SY), nobody else, and protected
// (P) from the ACEs its directory would pass on.
const adminsOnly = "D:P(A;;FA;;;BA)(A;;FA;;;SY)"

// ListenAPI listens on the agent's API socket (see [ListenUnix]) and
// replaces the socket file's DACL with a protected one that lets only the
// Administrators group and SYSTEM connect (connecting needs write access to
// the file).
//
// # Windows notes
//
// group must be "": a Windows file has no group that could open it to more
// users, so any other value is an error. The DACL is set right after the
// bind, so for that moment the socket carries the ACL inherited from its
// directory. The agent's default directory, made by [private.Mkdir], lets
// only SYSTEM and Administrators use it, and [private.Check] refuses a
// directory that lets anyone else create files in it.
func ListenAPI(path, group string) (net.Listener, error) {
	if group != "" {
		return nil, fmt.Errorf("api socket group %q: not supported on Windows, where only Administrators and SYSTEM may use the API", group)
	}
	l, err := ListenUnix(path, 0)
	if err != nil {
		return nil, err
	}
	if err := restrictToAdmins(path); err != nil {
		l.Close()
		return nil, fmt.Errorf("restrict access to %s: %w", path, err)
	}
	return l, nil
}

// restrictToAdmins sets the protected adminsOnly DACL on the file at path.
// The file is opened as a reparse point, not through it: an AF_UNIX socket
// file is a reparse point that Windows cannot open otherwise
// (ERROR_CANT_ACCESS_FILE), so the DACL is set through that handle rather
// than by SetNamedSecurityInfo's own lookup of the path.
func restrictToAdmins(path string) error {
	sd, err := windows.SecurityDescriptorFromString(adminsOnly)
	if err != nil {
		return err
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return err
	}
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return err
	}
	h, err := windows.CreateFile(p, windows.READ_CONTROL|windows.WRITE_DAC,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil,
		windows.OPEN_EXISTING, windows.FILE_FLAG_OPEN_REPARSE_POINT|windows.FILE_FLAG_BACKUP_SEMANTICS, 0)
	if err != nil {
		return err
	}
	defer windows.CloseHandle(h)
	return windows.SetSecurityInfo(h, windows.SE_FILE_OBJECT,
		windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION, nil, nil, dacl, nil)
}

// noAFUnixError is what the agent says on a Windows without AF_UNIX sockets
// (Windows Server 2016 and older, and wine), instead of a winsock error
// number. It wraps that error (WSAEAFNOSUPPORT).
type noAFUnixError struct{ err error }

func (e *noAFUnixError) Error() string {
	return "this Windows has no AF_UNIX sockets (needs Windows 10 1803 / Server 2019 or later)"
}

func (e *noAFUnixError) Unwrap() error { return e.err }

// noAFUnix returns a *noAFUnixError if err says that this system has no
// AF_UNIX sockets, else nil.
func noAFUnix(err error) error {
	if errors.Is(err, windows.WSAEAFNOSUPPORT) {
		return &noAFUnixError{err}
	}
	return nil
}
