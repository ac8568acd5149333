//go:build unix && !linux

package scan

// quick returns the Scanner's statPath and localFS: a stat through the
// system call package os uses, and no file system on which a raw one is
// known to be safe.
func (*osFS) quick() (func(string, bool, bool) (ID, error), func(string) bool) {
	return func(zpath string, follow, _ bool) (ID, error) { return statPathSys(zpath, follow) }, nil
}

// LocalFS reports whether the directory at path is on a file system where
// a stat never waits on a server; it is only known on Linux, and false
// here.
func LocalFS(string) bool { return false }
