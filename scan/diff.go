package scan

import "strings"

// Changes is what turns one Snapshot into the next.
type Changes struct {
	Added    []Entry // path not in old
	Removed  []Entry // path not in new (the old entry)
	Replaced []Entry // path in both with a different ID (the new entry)
}

// Diff returns the changes from old to new. Both must be sorted by Path with
// no duplicate paths, as Scan returns them; the result is then sorted by Path
// too. Diff is a linear merge of the two slices: it does no I/O and keeps no
// state.
//
// A path whose ID changed is Replaced: the socket at that path is a new
// incarnation, so whoever registered the old one should unregister it and
// register the new one.
//
// When old and new share their entries (the same slice, of the same length,
// as [Scanner.Scan] returns while nothing changes), Diff returns no changes
// at once, without comparing them.
func Diff(old, new Snapshot) Changes {
	var c Changes
	o, n := old.Entries, new.Entries
	if len(o) == len(n) && (len(o) == 0 || &o[0] == &n[0]) {
		return c
	}
	i, j := 0, 0
	for i < len(o) && j < len(n) {
		switch cmp := strings.Compare(o[i].Path, n[j].Path); {
		case cmp < 0:
			c.Removed = append(c.Removed, o[i])
			i++
		case cmp > 0:
			c.Added = append(c.Added, n[j])
			j++
		default:
			if o[i].ID != n[j].ID {
				c.Replaced = append(c.Replaced, n[j])
			}
			i++
			j++
		}
	}
	c.Removed = append(c.Removed, o[i:]...)
	c.Added = append(c.Added, n[j:]...)
	return c
}

// Empty reports whether c changes nothing.
func (c Changes) Empty() bool {
	return len(c.Added) == 0 && len(c.Removed) == 0 && len(c.Replaced) == 0
}

// Apply returns s with c applied: Removed paths are dropped, and Added and
// Replaced entries are put in (replacing any entry with the same path), so
// that Diff(a, b).Apply(a) equals b. s must be sorted as Scan returns it, and
// c as Diff returns it. Apply does not modify s; the result has its own
// slice.
func (c Changes) Apply(s Snapshot) Snapshot {
	in, add, rm, rep := s.Entries, c.Added, c.Removed, c.Replaced
	out := make([]Entry, 0, max(len(in)+len(add)-len(rm), 0))
	// Walk the union of the four sorted lists in path order. For each path,
	// Removed wins over Replaced, which wins over Added, which wins over s.
	for len(in) > 0 || len(add) > 0 || len(rm) > 0 || len(rep) > 0 {
		p := minPath(in, add, rm, rep)
		var e Entry
		keep := false
		if len(in) > 0 && in[0].Path == p {
			e, keep = in[0], true
			in = in[1:]
		}
		if len(add) > 0 && add[0].Path == p {
			e, keep = add[0], true
			add = add[1:]
		}
		if len(rep) > 0 && rep[0].Path == p {
			e, keep = rep[0], true
			rep = rep[1:]
		}
		if len(rm) > 0 && rm[0].Path == p {
			keep = false
			rm = rm[1:]
		}
		if keep {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return Snapshot{}
	}
	return Snapshot{Entries: out}
}

// minPath returns the smallest first path of the non-empty lists; at least
// one must be non-empty.
func minPath(lists ...[]Entry) string {
	var p string
	found := false
	for _, l := range lists {
		if len(l) > 0 && (!found || l[0].Path < p) {
			p, found = l[0].Path, true
		}
	}
	return p
}
