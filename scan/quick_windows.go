package scan

// quick returns the Scanner's statPath and localFS: none, as Windows
// identifies a directory by a handle to it (see statRoot).
func (*osFS) quick() (func(string, bool, bool) (ID, error), func(string) bool) {
	return nil, nil
}
