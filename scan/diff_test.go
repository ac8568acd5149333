package scan

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// snap builds a Snapshot from "path=id" pairs, where id is a small number
// standing for a whole ID.
func snap(pairs ...string) Snapshot {
	var s Snapshot
	for _, p := range pairs {
		path, n, _ := strings.Cut(p, "=")
		var ino uint64
		fmt.Sscan(n, &ino)
		s.Entries = append(s.Entries, Entry{Path: path, ID: ID{Ino: ino}})
	}
	return s
}

func TestDiff(t *testing.T) {
	tests := []struct {
		name     string
		old, new Snapshot
		want     Changes
	}{
		{name: "both empty"},
		{
			name: "same",
			old:  snap("/a=1", "/b=2"),
			new:  snap("/a=1", "/b=2"),
		},
		{
			name: "from empty",
			new:  snap("/a=1", "/b=2"),
			want: Changes{Added: snap("/a=1", "/b=2").Entries},
		},
		{
			name: "to empty",
			old:  snap("/a=1", "/b=2"),
			want: Changes{Removed: snap("/a=1", "/b=2").Entries},
		},
		{
			name: "replaced keeps the new entry",
			old:  snap("/a=1", "/b=2"),
			new:  snap("/a=1", "/b=3"),
			want: Changes{Replaced: snap("/b=3").Entries},
		},
		{
			name: "interleaved",
			old:  snap("/a=1", "/c=3", "/d=4", "/f=6"),
			new:  snap("/b=2", "/c=3", "/d=5", "/e=7"),
			want: Changes{
				Added:    snap("/b=2", "/e=7").Entries,
				Removed:  snap("/a=1", "/f=6").Entries,
				Replaced: snap("/d=5").Entries,
			},
		},
		{
			name: "byte order, not walk order",
			old:  snap("/p/a-b=1", "/p/a/x=2"),
			new:  snap("/p/a-b=1", "/p/a.b=3", "/p/a/x=2"),
			want: Changes{Added: snap("/p/a.b=3").Entries},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Diff(tc.old, tc.new)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Diff(%v, %v) (-want +got):\n%s", tc.old, tc.new, d)
			}
			if got.Empty() != (len(tc.want.Added)+len(tc.want.Removed)+len(tc.want.Replaced) == 0) {
				t.Errorf("Diff(%v, %v).Empty() = %v", tc.old, tc.new, got.Empty())
			}
			if d := cmp.Diff(tc.new, apply(got, tc.old)); d != "" {
				t.Errorf("apply(Diff(old, new), old) (-new +got):\n%s", d)
			}
		})
	}
}

// TestDiffShared diffs snapshots that share their entries, wholly or in
// part: only the very same slice is no change without a comparison.
func TestDiffShared(t *testing.T) {
	s := snap("/a=1", "/b=2", "/c=3")
	tests := []struct {
		name     string
		old, new Snapshot
		want     Changes
	}{
		{name: "same slice", old: s, new: s},
		{name: "copy", old: s, new: Snapshot{Entries: slices.Clone(s.Entries)}},
		{name: "nil and empty", old: Snapshot{}, new: Snapshot{Entries: []Entry{}}},
		{
			name: "shorter, same start",
			old:  s,
			new:  Snapshot{Entries: s.Entries[:2]},
			want: Changes{Removed: snap("/c=3").Entries},
		},
		{
			name: "longer, same start",
			old:  Snapshot{Entries: s.Entries[:2]},
			new:  s,
			want: Changes{Added: snap("/c=3").Entries},
		},
		{
			name: "same length, later start",
			old:  Snapshot{Entries: s.Entries[:2]},
			new:  Snapshot{Entries: s.Entries[1:]},
			want: Changes{Added: snap("/c=3").Entries, Removed: snap("/a=1").Entries},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, Diff(tc.old, tc.new)); d != "" {
				t.Errorf("Diff(%v, %v) (-want +got):\n%s", tc.old, tc.new, d)
			}
		})
	}
}

func TestApplyDoesNotModify(t *testing.T) {
	old := snap("/a=1", "/b=2", "/c=3")
	keep := slices.Clone(old.Entries)
	c := Changes{
		Added:    snap("/a0=9").Entries,
		Removed:  snap("/b=2").Entries,
		Replaced: snap("/c=4").Entries,
	}
	got := apply(c, old)
	if d := cmp.Diff(keep, old.Entries); d != "" {
		t.Errorf("Apply modified its argument (-before +after):\n%s", d)
	}
	if d := cmp.Diff(snap("/a=1", "/a0=9", "/c=4"), got); d != "" {
		t.Errorf("Apply (-want +got):\n%s", d)
	}
	got.Entries[0].Path = "/changed"
	if old.Entries[0].Path != "/a" {
		t.Errorf("Apply result shares its slice with the argument")
	}
}

// TestApplyOther applies changes to a snapshot they were not computed from:
// Removed drops a path if present, Added and Replaced put an entry in.
func TestApplyOther(t *testing.T) {
	c := Changes{
		Added:    snap("/b=2").Entries,
		Removed:  snap("/x=1").Entries,
		Replaced: snap("/z=5").Entries,
	}
	got := apply(c, snap("/b=1", "/y=1"))
	if d := cmp.Diff(snap("/b=2", "/y=1", "/z=5"), got); d != "" {
		t.Errorf("Apply (-want +got):\n%s", d)
	}
}

// fuzzSnapshot turns fuzz bytes into a valid Snapshot: three bytes per
// entry (two for the path, one for the ID), sorted, with duplicate paths
// dropped. Paths come from a small alphabet so that the two snapshots share
// many of them, and include '/' and '-' so that nested names sort unlike
// walk order.
func fuzzSnapshot(b []byte) Snapshot {
	const alphabet = "ab-/.z"
	var es []Entry
	for ; len(b) >= 3; b = b[3:] {
		p := []byte{'/', alphabet[b[0]%6], alphabet[b[0]/6%6], alphabet[b[1]%6]}
		if b[1]&0x80 != 0 {
			p = p[:3]
		}
		es = append(es, Entry{Path: string(p), ID: ID{Ino: uint64(b[2] % 4), Birth: int64(b[2] >> 2)}})
	}
	slices.SortStableFunc(es, byPath)
	es = slices.CompactFunc(es, func(x, y Entry) bool { return x.Path == y.Path })
	if len(es) == 0 {
		return Snapshot{}
	}
	return Snapshot{Entries: es}
}

func byPath(x, y Entry) int { return strings.Compare(x.Path, y.Path) }

// FuzzDiff checks Diff on two snapshots built from arbitrary bytes:
// Diff(a, a) is empty, also for a copy of a; applying Diff(a, b) to a gives
// b; Diff(a, b) is empty exactly when a equals b; and Added, Removed and
// Replaced are each sorted by path, with no path in two of them.
func FuzzDiff(f *testing.F) {
	f.Add([]byte{}, []byte{})
	f.Add([]byte{1, 2, 3}, []byte{})
	f.Add([]byte{}, []byte{1, 2, 3, 4, 5, 6})
	f.Add([]byte{1, 2, 3, 4, 5, 6}, []byte{1, 2, 4, 4, 5, 6})
	f.Add([]byte{0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3}, []byte{3, 3, 3, 2, 2, 9, 9, 9, 9})
	f.Fuzz(func(t *testing.T, x, y []byte) {
		a, b := fuzzSnapshot(x), fuzzSnapshot(y)
		if c := Diff(a, a); !c.Empty() {
			t.Errorf("Diff(a, a) = %v, want empty", c)
		}
		// Diff(a, a) returns at once; a copy goes through the merge.
		if c := Diff(a, Snapshot{Entries: slices.Clone(a.Entries)}); !c.Empty() {
			t.Errorf("Diff(a, copy of a) = %v, want empty", c)
		}
		c := Diff(a, b)
		// cmp.Diff only on failure: it is slow, and the fuzzer's
		// minimisation runs this function once per byte.
		if got := apply(c, a); !slices.Equal(got.Entries, b.Entries) || (got.Entries == nil) != (b.Entries == nil) {
			t.Errorf("apply(Diff(a, b), a) (-b +got):\n%s", cmp.Diff(b, got))
		}
		if c.Empty() != slices.Equal(a.Entries, b.Entries) {
			t.Errorf("Diff(a, b).Empty() = %v, want %v", c.Empty(), !c.Empty())
		}
		// Sorted and disjoint: merged, the three lists are strictly sorted.
		all := slices.Concat(c.Added, c.Removed, c.Replaced)
		for name, l := range map[string][]Entry{"Added": c.Added, "Removed": c.Removed, "Replaced": c.Replaced} {
			if !slices.IsSortedFunc(l, byPath) {
				t.Errorf("%s not sorted: %v", name, l)
			}
		}
		slices.SortFunc(all, byPath)
		for i := 1; i < len(all); i++ {
			if all[i-1].Path == all[i].Path {
				t.Errorf("%s is in two of Added, Removed and Replaced: %+v", all[i].Path, c)
			}
		}
	})
}

// apply returns s with c applied: Removed paths are dropped, and Added and
// Replaced entries are put in (replacing any entry with the same path), so
// that apply(Diff(a, b), a) equals b. s must be sorted as Scan returns it, and
// c as Diff returns it. Apply does not modify s; the result has its own
// slice.
func apply(c Changes, s Snapshot) Snapshot {
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
