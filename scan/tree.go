package scan

import (
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// node is what a Scanner knows of one directory: its stat and its listing
// as of its last read.
type node struct {
	prefix string // the directory's path and a separator; prefix+name is an entry's path
	id     ID     // the directory's stat, taken before its last read
	read   bool   // kids is the listing as of id; false before the first read and after a failure
	racy   bool   // id.Mtime was too recent at the read to show a later change: read again
	warned bool   // a failure to stat or read the directory was logged and persists
	nsub   int    // number of kids that are subdirectories
	kids   []kid  // sorted by key
	zpath  string // the directory's path and a NUL, for statPath; set when first needed
}

// kid is a socket or a subdirectory in a node.
//
// Kids are sorted by key, which is the name for a socket and the name and a
// separator for a subdirectory. Every path below a subdirectory starts with
// its key, and a subdirectory's key is no proper prefix of another key (no
// name holds a separator), so the entries of a tree, listed kid by kid in key
// order and depth first, are sorted by path with no sort over the whole list:
// "a.sock" < "a/x.sock" because '.' < '/', and "a" < "ab/x.sock".
type kid struct {
	key    string // name, or name and separator for a subdirectory
	sub    *node  // the subdirectory; nil for a socket
	e      Entry  // the socket; its ID is valid if ok
	ok     bool   // e.ID is the socket's last known ID
	warned bool   // a problem with the socket (its stat failed, its path is too long) was logged and persists
}

// stale reports whether n must be read because the directory's stat is now
// cur.
func (n *node) stale(cur ID, full bool) bool {
	return full || !n.read || n.racy || cur != n.id
}

// sync brings n up to date with d, the open directory it stands for, whose
// stat cur was taken before it was opened: it reads d if it may have changed,
// then syncs the subdirectories, and marks w changed if it drops one. It
// returns the error of reading d, and n then keeps its kids.
func (w *walk) sync(n *node, d dir, cur ID, full bool) error {
	if n.stale(cur, full) {
		if err := w.read(n, d, cur); err != nil {
			n.read = false
			return err
		}
	}
	if n.nsub == 0 {
		return nil
	}
	kept := n.kids[:0]
	for _, k := range n.kids {
		if k.sub == nil || w.syncSub(d, k.sub, k.key[:len(k.key)-1], full) {
			kept = append(kept, k)
		} else {
			n.nsub--
			w.changed = true
		}
	}
	clear(n.kids[len(kept):])
	n.kids = kept
	return nil
}

// syncSub brings n, the subdirectory called name of the open directory pd, up
// to date. It opens n only if n must be read or has subdirectories of its
// own, so an unchanged leaf directory costs one stat. It returns false if
// the subdirectory is gone; failures are logged, and n keeps its kids.
func (w *walk) syncSub(pd dir, n *node, name string, full bool) bool {
	path := n.prefix[:len(n.prefix)-1]
	cur, err := pd.statDir(name, path)
	if err == nil && (n.nsub > 0 || n.stale(cur, full)) {
		var d dir
		d, err = pd.sub(name, path)
		if err == nil {
			err = w.sync(n, d, cur, full)
			d.close()
		}
	}
	if err != nil {
		if gone(err) {
			return false
		}
		n.read = false
		if !n.warned {
			w.s.log.Warn("cannot read directory", "path", path, "err", err)
			n.warned = true
		}
		return true
	}
	if n.warned {
		w.s.log.Info("directory readable again", "path", path)
		n.warned = false
	}
	return true
}

// read reads d, the directory of n whose stat before the read is cur, into
// n.kids, and stats its sockets. What n knew of a name still listed is
// kept: the node of a subdirectory, the ID of a socket that cannot be
// stat'ed, and what was logged. If the kids differ from those before, w is
// marked changed.
func (w *walk) read(n *node, d dir, cur ID) error {
	ents, err := d.entries()
	if err != nil {
		return err
	}
	names := w.names[:0]
	for _, e := range ents {
		nm := e.Name()
		switch {
		case strings.HasPrefix(nm, "."):
		case e.Type().IsDir():
			names = append(names, nm+sep)
		case d.isSocket(e):
			names = append(names, nm)
		}
	}
	slices.Sort(names)

	// Merge the sorted names with the sorted kids of the last read.
	kids, old := w.kids[:0], n.kids
	n.nsub = 0
	for _, key := range names {
		for len(old) > 0 && old[0].key < key {
			old = old[1:]
		}
		var k kid
		switch {
		case len(old) > 0 && old[0].key == key: // the same name, and so the same type
			k = old[0]
			old = old[1:]
		case strings.HasSuffix(key, sep): // a subdirectory's
			k.sub = &node{prefix: n.prefix + key}
			k.key = k.sub.prefix[len(n.prefix):]
		default:
			k.e.Path = n.prefix + key
			k.key = k.e.Path[len(n.prefix):]
		}
		if k.sub != nil {
			n.nsub++
		} else if !w.stat(d, &k) {
			continue
		}
		kids = append(kids, k)
	}
	clear(names)
	w.names = names[:0]
	if !w.changed && !sameKids(n.kids, kids) {
		w.changed = true
	}
	was := len(n.kids)
	n.kids = append(n.kids[:0], kids...)
	if len(n.kids) < was {
		clear(n.kids[len(n.kids):was]) // let dropped subtrees go
	}
	clear(kids)
	w.kids = kids[:0]

	n.id, n.read = cur, true
	n.racy = w.racy(cur.Mtime)
	return nil
}

// racy reports whether a directory whose mtime is mtime (ns), read in this
// scan, must be read again by the next one whatever its stat: a change in
// the same timestamp granule as the read would leave the stat as it was.
func (w *walk) racy(mtime int64) bool {
	slack := racySlack
	if mtime%int64(time.Second) != 0 {
		slack = fineRacySlack
	}
	return mtime >= w.start-int64(slack)
}

// sameKids reports whether the kids a and b hold the same entries: the same
// keys, subdirectory nodes, and sockets with the same ok and IDs. What is
// below the subdirectories is compared when they are read.
func sameKids(a, b []kid) bool {
	return slices.EqualFunc(a, b, func(x, y kid) bool {
		return x.key == y.key && x.sub == y.sub && x.ok == y.ok && x.e == y.e
	})
}

// stat refreshes the ID of k, a socket in d. It returns false if the socket
// is gone.
func (w *walk) stat(d dir, k *kid) bool {
	p := k.e.Path
	if len(p) > maxSocketPath {
		if !k.warned {
			err := &PathTooLongError{Path: p, Len: len(p), Limit: maxSocketPath}
			w.s.log.Warn("socket path too long", "path", p, "len", err.Len, "limit", err.Limit, "err", err)
			w.s.ignoredTooLong.Add(1)
			k.warned = true
		}
		k.ok = false
		return true
	}
	if !utf8.ValidString(p) {
		if !k.warned {
			w.s.log.Warn("socket ignored: path is not valid UTF-8", "path", escaped(p))
			w.s.ignoredName.Add(1)
			k.warned = true
		}
		k.ok = false
		return true
	}
	id, err := d.id(k.key, p)
	switch {
	case err == nil:
		k.e.ID, k.ok, k.warned = id, true, false
	case gone(err):
		return false
	case !k.warned:
		w.s.log.Warn("cannot stat socket", "path", p, "err", err)
		k.warned = true
	}
	return true
}

// appendEntries appends the sockets of n and its subdirectories to out, in
// path order.
func (n *node) appendEntries(out []Entry) []Entry {
	for i := range n.kids {
		switch k := &n.kids[i]; {
		case k.sub != nil:
			out = k.sub.appendEntries(out)
		case k.ok:
			out = append(out, k.e)
		}
	}
	return out
}

// escaped returns s with each byte that is not valid UTF-8 written \xNN, and
// other non-printable characters escaped as Go does in a quoted string: a
// log handler would make an invalid byte U+FFFD (JSON) or quote the value
// once more (text).
func escaped(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}
