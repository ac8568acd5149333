package scan

// unchanged reports whether the stat of each directory alone shows that
// nothing Scan reports can have changed since the last Scan: every
// directory was read, and not too soon after a change (racy), and a stat
// of it by path now gives what it gave before that read. Then Scan opens nothing, reads nothing and allocates nothing: an
// idle Scan of a tree of directories costs one stat per directory.
//
// It answers false when it cannot tell: no statPath (Windows, where a
// directory is stat'ed by opening it), or a stat that fails or differs.
// Scan then takes the long way, which finds what changed and reports any
// error.
func (s *Scanner) unchanged() bool {
	if s.statPath == nil {
		return false
	}
	for _, r := range s.roots {
		if r.n == nil {
			return false
		}
		if r.n.id.Dev != r.fsDev && s.localFS != nil {
			// A new file system under the root (or the first look at it).
			r.fsDev, r.local = r.n.id.Dev, s.localFS(r.path)
		}
		if !s.same(r, r.n, r.path, true) {
			return false
		}
	}
	return true
}

// same reports whether n, the directory at path below root r, and the
// directories under it still have the stat of their last read, which must
// have left nothing to read again. The root is stat'ed following symlinks,
// as its read opens it; the directories below it are not.
func (s *Scanner) same(r *root, n *node, path string, follow bool) bool {
	if !n.read || n.racy { // a failed read or stat left n unread
		return false
	}
	if n.zpath == "" {
		n.zpath = path + "\x00" // once: a stat by path allocates nothing after
	}
	raw := r.local && n.id.Dev == r.fsDev
	if cur, err := s.statPath(n.zpath, follow, raw); err != nil || cur != n.id {
		return false
	}
	if n.nsub == 0 {
		return true
	}
	for i := range n.kids {
		if sub := n.kids[i].sub; sub != nil && !s.same(r, sub, sub.prefix[:len(sub.prefix)-1], false) {
			return false
		}
	}
	return true
}
