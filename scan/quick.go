package scan

// unchanged reports whether the stat of each directory of the root r alone
// shows that nothing Scan reports can have changed below it since its last
// read: every directory was read, and not too soon after a change (racy),
// and a stat of it by path now gives what it gave before that read. Then
// the root costs one stat per directory, and opens, reads and allocates
// nothing.
//
// It answers false when it cannot tell: no statPath (Windows, where a
// directory is stat'ed by opening it), a root not read yet, or a stat that
// fails or differs. The root is then synced the long way, which finds what
// changed and reports any error.
func (w *walk) unchanged(r *root) bool {
	return w.s.statPath != nil && r.n != nil && w.same(r.n, r.path, true, r.n.id.Dev)
}

// same reports whether n, the directory at path, and the directories under
// it still have the stat of their last read, which must have left nothing
// to read again. The root is stat'ed following symlinks, as its read opens
// it; the directories below it are not. The stat is a raw one (see
// statPath) when w.raw and the directory was on the root's device, dev, at
// its last read.
func (w *walk) same(n *node, path string, follow bool, dev uint64) bool {
	if !n.read || n.racy { // a failed read or stat left n unread
		return false
	}
	if n.zpath == "" {
		n.zpath = path + "\x00" // once: a stat by path allocates nothing after
	}
	raw := w.raw && n.id.Dev == dev
	if cur, err := w.s.statPath(n.zpath, follow, raw); err != nil || cur != n.id {
		return false
	}
	if n.nsub == 0 {
		return true
	}
	for i := range n.kids {
		if sub := n.kids[i].sub; sub != nil && !w.same(sub, sub.prefix[:len(sub.prefix)-1], false, dev) {
			return false
		}
	}
	return true
}
