package scan

// quick returns the Scanner's statPath and settled: no statPath, as
// Windows identifies a directory by a handle to it (see statRoot), and no
// plugin dir settled.
func (*osFS) quick([]string) (func(string, bool, bool) (ID, error), func(int) bool) {
	return nil, func(int) bool { return false }
}
