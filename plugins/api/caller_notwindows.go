//go:build !windows

package api

import (
	"os"
	"strconv"

	"github.com/plugreg/plugreg/plugins/peer"
)

// identify returns who is at the other end of the connected unix socket
// fd: its uid and pid, trusted if root or the agent's own uid.
func identify(fd uintptr) caller {
	cred, err := peer.FromFD(fd)
	if err != nil {
		return caller{err: err}
	}
	self := uint32(os.Geteuid())
	who := "uid " + strconv.FormatUint(uint64(cred.UID), 10)
	if cred.PID > 0 {
		who += " (pid " + strconv.Itoa(int(cred.PID)) + ")"
	}
	return caller{uid: cred.UID, hasUID: true, trusted: cred.UID == 0 || cred.UID == self, who: who}
}

// denied returns the message of PermissionDenied for c, which may read
// the API but not write.
func (c caller) denied() string {
	return "permission denied: " + c.who + " may read the API but not register or deregister plugins; " +
		"root, the agent's uid " + strconv.Itoa(os.Geteuid()) + " and the uids of the agent's --api-register-uid may. " +
		"To allow it, run the agent with --api-register-uid " + strconv.FormatUint(uint64(c.uid), 10)
}
