package scan

import "io/fs"

// SocketFile is what [StatSocket] says of a socket file.
type SocketFile struct {
	ID     ID     // the ID a Scan gives the socket
	UID    uint32 // the file's owner; 0 where HasUID is false
	HasUID bool   // false where files have no owner uid (Windows)
}

// NotSocketError is the error of [StatSocket] for a file that is not a
// socket (a symlink is never followed).
type NotSocketError struct {
	Path string
	Mode fs.FileMode // what the file is, as ls shows it
}

func (e *NotSocketError) Error() string {
	return e.Path + ": not a socket (mode " + e.Mode.String() + ")"
}
