//go:build unix

package scan

import "io/fs"

// isSocket reports whether e is a unix-domain socket. On Linux and the BSDs
// the type comes from the directory entry's d_type, so this costs no system
// call; where the file system leaves d_type unknown, package os has already
// lstat'ed the entry.
func isSocket(e fs.DirEntry) bool {
	return e.Type()&fs.ModeSocket != 0
}
