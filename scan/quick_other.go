//go:build unix && !linux

package scan

// quick returns the Scanner's statPath and settled: a stat through the
// system call package os uses, and no plugin dir settled, as no mount
// table says here which file systems cannot block.
func (*osFS) quick([]string) (func(string, bool, bool) (ID, error), func(int) bool) {
	return func(zpath string, follow, _ bool) (ID, error) { return statPathSys(zpath, follow) }, func(int) bool { return false }
}
