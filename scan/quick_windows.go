package scan

// quick returns the Scanner's statPath and localFS: none, as Windows
// identifies a directory by a handle to it (see statRoot).
func (*osFS) quick() (func(string, bool, bool) (ID, error), func(string) bool) {
	return nil, nil
}

// LocalFS reports whether the directory at path is on a file system where
// a stat never waits on a server; it is only known on Linux, and false
// here.
func LocalFS(string) bool { return false }
