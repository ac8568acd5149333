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
	if old.Same(new) {
		return c
	}
	o, n := old.Entries, new.Entries
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
