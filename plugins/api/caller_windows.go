package api

import (
	"fmt"
	"strconv"

	"golang.org/x/sys/windows"

	"github.com/plugreg/plugreg/plugins/peer"
)

// identify returns who is at the other end of the connected AF_UNIX
// socket fd: its pid (SIO_AF_UNIX_GETPEERPID) and its process's user,
// trusted if SYSTEM, the agent's own user or a member of Administrators
// (an enabled member: an administrator's unelevated token holds the group
// for deny only).
func identify(fd uintptr) caller {
	pid, err := peer.ProcessID(fd)
	if err != nil {
		return caller{err: err}
	}
	var c caller
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, pid)
	if err != nil {
		c.err = fmt.Errorf("open process %d: %w", pid, err)
		return c
	}
	defer windows.CloseHandle(h)
	var tok windows.Token
	if err := windows.OpenProcessToken(h, windows.TOKEN_QUERY|windows.TOKEN_DUPLICATE, &tok); err != nil {
		c.err = fmt.Errorf("open the token of process %d: %w", pid, err)
		return c
	}
	defer tok.Close()
	var user string
	c.trusted, user, c.err = trustedToken(tok)
	c.who = "pid " + strconv.FormatUint(uint64(pid), 10) + " (user " + user + ")"
	return c
}

// trustedToken returns whether tok, a process's primary token, is that of
// SYSTEM, of the agent's own user or of a member of Administrators, and
// the SID of its user.
func trustedToken(tok windows.Token) (bool, string, error) {
	u, err := tok.GetTokenUser()
	if err != nil {
		return false, "", fmt.Errorf("token user: %w", err)
	}
	user := u.User.Sid
	self, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return false, user.String(), fmt.Errorf("the agent's token user: %w", err)
	}
	if user.IsWellKnown(windows.WinLocalSystemSid) || user.Equals(self.User.Sid) {
		return true, user.String(), nil
	}
	admins, err := windows.CreateWellKnownSid(windows.WinBuiltinAdministratorsSid)
	if err != nil {
		return false, user.String(), fmt.Errorf("administrators SID: %w", err)
	}
	// CheckTokenMembership needs an impersonation token.
	var imp windows.Token
	if err := windows.DuplicateTokenEx(tok, windows.TOKEN_QUERY, nil, windows.SecurityIdentification, windows.TokenImpersonation, &imp); err != nil {
		return false, user.String(), fmt.Errorf("duplicate token: %w", err)
	}
	defer imp.Close()
	admin, err := imp.IsMember(admins)
	if err != nil {
		return false, user.String(), fmt.Errorf("administrators membership: %w", err)
	}
	return admin, user.String(), nil
}

// denied returns the message of PermissionDenied for c, which may read
// the API but not write.
func (c caller) denied() string {
	return "permission denied: " + c.who + " may read the API but not register or deregister plugins; " +
		"SYSTEM, the agent's user and elevated members of Administrators may"
}
