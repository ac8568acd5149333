package scan

import (
	"strings"
	"sync"
)

// mountGate tells, for each plugin dir, whether a system call on a path
// below it cannot block: whether every file system that holds such a path
// keeps its data in this machine's memory or on its disks, never waiting on
// a server or a user-space daemon. Only then may a stat or a connect there
// be a raw system call, which holds its thread and the Go runtime's P until
// it returns: one that hangs would stop every goroutine at the next garbage
// collection. It is safe for concurrent use.
//
// It reads the mount table when made, and again whenever the table has
// changed (changed), before it answers: a file system mounted below a plugin
// dir, or over it, ends its raw calls at the first question after the mount,
// until the mount table read again shows that every mount holding a path
// below the dir is local.
type mountGate struct {
	mu      sync.Mutex
	changed func() bool             // whether the mount table changed since the last call; true when it cannot tell
	table   func() ([]mount, error) // reads the mount table
	roots   []string                // the plugin dirs, cleaned and absolute
	settled []bool                  // per root, as of the last read of the table
}

// mount is one line of the mount table: where it is mounted and the type
// of its file system.
type mount struct {
	point, fstype string
}

// newMountGate returns the gate of the plugin dirs roots, read from table
// now; changed reports later changes.
func newMountGate(roots []string, changed func() bool, table func() ([]mount, error)) *mountGate {
	g := &mountGate{changed: changed, table: table, roots: roots, settled: make([]bool, len(roots))}
	g.verify()
	return g
}

// rootSettled reports whether a system call on a path below roots[i]
// cannot block, reading the mount table again first if it changed.
func (g *mountGate) rootSettled(i int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.changed() {
		g.verify()
	}
	return g.settled[i]
}

// verify reads the mount table and decides each root: not settled on any
// doubt.
func (g *mountGate) verify() {
	ms, err := g.table()
	for i, r := range g.roots {
		g.settled[i] = err == nil && allLocal(r, ms)
	}
}

// allLocal reports whether every mount that holds a path below root (or
// root itself) in ms has a local file system type (localFSType): the mounts
// at the longest mount point that is root or above it, all of them, and
// every mount below root, even one mounted over by another.
func allLocal(root string, ms []mount) bool {
	holder := -1 // the length of the longest mount point holding root
	for _, m := range ms {
		if below(m.point, root) && !localFSType(m.fstype) {
			return false
		}
		if below(root, m.point) || root == m.point {
			holder = max(holder, len(m.point))
		}
	}
	if holder < 0 {
		return false
	}
	for _, m := range ms {
		if len(m.point) == holder && (below(root, m.point) || root == m.point) && !localFSType(m.fstype) {
			return false
		}
	}
	return true
}

// below reports whether path is strictly below dir.
func below(path, dir string) bool {
	if dir == "/" {
		return len(path) > 1 && path[0] == '/'
	}
	return len(path) > len(dir) && path[len(dir)] == '/' && strings.HasPrefix(path, dir)
}

// localFSType reports whether a file system of type t, as the mount table
// names it, is held in memory or on local disks, where a stat or the lookup
// of a path never waits on a server or a daemon (see "File systems that do
// not answer" in the package documentation).
func localFSType(t string) bool {
	switch t {
	case "tmpfs", "ramfs", "devtmpfs", "ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "overlay", "zfs":
		return true
	}
	return false
}
