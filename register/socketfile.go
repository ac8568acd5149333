package register

import (
	"errors"
	"fmt"

	"github.com/plugreg/plugreg/scan"
)

// socketFile returns the identity and owner of the socket file at path,
// without following a symlink or reparse point: anything but a socket
// there is an error. The identity is taken by scan.StatSocket, the call
// the scan takes it with, so that one socket file has one identity at the
// scan and at every check. It allocates nothing unless it fails: it runs
// for every liveness check. With raw, it is scan.StatSocketRaw, for a path
// where no lookup can hang (Client.Settled).
func socketFile(path string, raw bool) (socketStat, error) {
	stat := scan.StatSocket
	if raw {
		stat = scan.StatSocketRaw
	}
	f, err := stat(path)
	if err != nil {
		if ns, ok := errors.AsType[*scan.NotSocketError](err); ok {
			return socketStat{}, fmt.Errorf("%w (mode %v)", errNotSocket, ns.Mode)
		}
		return socketStat{}, err
	}
	return socketStat{id: f.ID, uid: f.UID, hasUID: f.HasUID}, nil
}

// is reports whether the file is the one the scanner saw as id: the same
// file and times (a socket bound again at a path may get the old one's
// inode, but not its times).
func (s socketStat) is(id scan.ID) bool { return s.id == id }
