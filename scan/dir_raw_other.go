//go:build unix && !linux

package scan

// openRootRaw is openRoot: no system call is raw here, as no plugin dir is
// settled (see quick).
func openRootRaw(path string) (dir, error) { return (&osFS{}).openRoot(path, false) }

// statRootSys is statRoot's stat: statPathSys, following symlinks.
func statRootSys(zpath string, _ bool) (ID, error) { return statPathSys(zpath, true) }
