package scan

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// history records the snapshots of a run of scans, to check that each
// shares the previous one's entries exactly when nothing changed, and that
// no scan writes to the entries of an earlier one.
type history struct {
	prev          Snapshot // the last snapshot added
	snaps, copies []Snapshot
}

// add records got, the snapshot of step name, which shares the previous
// snapshot's entries if and only if same (not checked for the first).
func (h *history) add(t *testing.T, name string, got Snapshot, same bool) {
	t.Helper()
	if len(h.snaps) > 0 && h.prev.Same(got) != same {
		t.Errorf("%s: Scan() returned the previous entries: %v, want %v", name, h.prev.Same(got), same)
	}
	h.prev = got
	h.snaps = append(h.snaps, got)
	h.copies = append(h.copies, Snapshot{Entries: slices.Clone(got.Entries)})
}

// untouched checks that later scans left every snapshot as it was.
func (h *history) untouched(t *testing.T) {
	t.Helper()
	if d := cmp.Diff(h.copies, h.snaps); d != "" {
		t.Errorf("snapshots changed by later scans (-then +now):\n%s", d)
	}
}

// TestScanUnchangedIsShared makes changes of every kind to a real plugin
// dir, and checks that Scan returns the previous Snapshot itself when
// nothing it reports changed, a new and correct one after every change, and
// never writes to a Snapshot it returned before.
func TestScanUnchangedIsShared(t *testing.T) {
	t.Parallel()
	needUnixSockets(t)
	dir := filepath.Join(tempDir(t), "plugins")
	in := func(rel string) string { return filepath.Join(dir, filepath.FromSlash(rel)) }
	for _, p := range join(dir, "a.sock", "sub/b.sock", "sub/deep/c.sock") {
		socketFile(t, p)
	}
	// No directory is racy, and b.sock bound again gets a new mtime.
	age(t, dir)
	s := mustNew(t, nil, dir)
	f := &faults{read: make(map[string]error), stat: make(map[string]error)}
	f.wrap(s)
	rebind := func(rel string) {
		if err := os.Remove(in(rel)); err != nil {
			t.Fatal(err)
		}
		socketFile(t, in(rel))
	}
	removeAll := func(rel string) {
		if err := os.RemoveAll(in(rel)); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name     string
		change   func()
		want     []string // paths relative to dir
		same     bool     // the previous Snapshot comes back
		replaced []string // paths Diff reports as Replaced
	}{
		{
			name: "first scan",
			want: []string{"a.sock", "sub/b.sock", "sub/deep/c.sock"},
		},
		{
			name: "nothing changed",
			want: []string{"a.sock", "sub/b.sock", "sub/deep/c.sock"},
			same: true,
		},
		{
			// Every directory read, every socket stat'ed: all as before.
			name:   "nothing changed, full scan",
			change: func() { s.FullScanEvery = 1 },
			want:   []string{"a.sock", "sub/b.sock", "sub/deep/c.sock"},
			same:   true,
		},
		{
			name:   "socket added",
			change: func() { s.FullScanEvery = 0; socketFile(t, in("sub/d.sock")) },
			want:   []string{"a.sock", "sub/b.sock", "sub/d.sock", "sub/deep/c.sock"},
		},
		{
			// sub/ changed just now: it is racy, and read again.
			name: "nothing changed after a change",
			want: []string{"a.sock", "sub/b.sock", "sub/d.sock", "sub/deep/c.sock"},
			same: true,
		},
		{
			name:   "socket removed",
			change: func() { removeAll("a.sock") },
			want:   []string{"sub/b.sock", "sub/d.sock", "sub/deep/c.sock"},
		},
		{
			name:     "socket replaced at the same path",
			change:   func() { rebind("sub/b.sock") },
			want:     []string{"sub/b.sock", "sub/d.sock", "sub/deep/c.sock"},
			replaced: []string{"sub/b.sock"},
		},
		{
			name:   "subdirectory added",
			change: func() { socketFile(t, in("new/x.sock")) },
			want:   []string{"new/x.sock", "sub/b.sock", "sub/d.sock", "sub/deep/c.sock"},
		},
		{
			name:   "subdirectory removed",
			change: func() { removeAll("sub/deep") },
			want:   []string{"new/x.sock", "sub/b.sock", "sub/d.sock"},
		},
		{
			// The read fails, and sub/ keeps the entries of its last read.
			name:   "directory unreadable after a change",
			change: func() { f.read[in("sub")] = syscall.EACCES; socketFile(t, in("sub/e.sock")) },
			want:   []string{"new/x.sock", "sub/b.sock", "sub/d.sock"},
			same:   true,
		},
		{
			name:   "directory readable again",
			change: func() { delete(f.read, in("sub")) },
			want:   []string{"new/x.sock", "sub/b.sock", "sub/d.sock", "sub/e.sock"},
		},
		{
			// The socket keeps its last ID.
			name:   "socket cannot be stat'ed after a change to its directory",
			change: func() { f.stat[in("sub/d.sock")] = syscall.EIO; writeFile(t, in("sub/file")) },
			want:   []string{"new/x.sock", "sub/b.sock", "sub/d.sock", "sub/e.sock"},
			same:   true,
		},
		{
			name:   "socket can be stat'ed again",
			change: func() { delete(f.stat, in("sub/d.sock")); writeFile(t, in("sub/file2")) },
			want:   []string{"new/x.sock", "sub/b.sock", "sub/d.sock", "sub/e.sock"},
			same:   true,
		},
		{
			name:   "plugin dir removed",
			change: func() { removeAll(".") },
		},
		{
			name: "plugin dir still missing",
			same: true,
		},
		{
			name:   "plugin dir created again",
			change: func() { socketFile(t, in("z.sock")) },
			want:   []string{"z.sock"},
		},
		{
			name: "nothing changed at the end",
			want: []string{"z.sock"},
			same: true,
		},
	}
	var h history
	for _, st := range steps {
		if st.change != nil {
			st.change()
		}
		got := mustScan(t, s)
		var rel []string
		for _, e := range got.Entries {
			r, _ := filepath.Rel(dir, e.Path)
			rel = append(rel, filepath.ToSlash(r))
		}
		if d := cmp.Diff(st.want, rel); d != "" {
			t.Errorf("%s: Scan() paths (-want +got):\n%s", st.name, d)
		}
		if len(f.read) == 0 && len(f.stat) == 0 {
			// A full scan by a new Scanner that, unlike New, does not
			// make the dir when it is missing.
			full := mustScan(t, newScanner([]string{dir}, nil, (&osFS{}).openRoot))
			if d := cmp.Diff(full, got); d != "" {
				t.Errorf("%s: Scan() differs from a full scan (-full +incremental):\n%s", st.name, d)
			}
		}
		if d := cmp.Diff(join(dir, st.replaced...), paths(Snapshot{Entries: Diff(h.prev, got).Replaced})); d != "" {
			t.Errorf("%s: Diff() replaced (-want +got):\n%s", st.name, d)
		}
		h.add(t, st.name, got, st.same)
	}
	h.untouched(t)
}

// TestIdleScanAllocatesNothing: once a tree of real directories was read
// and nothing changes, a Scan allocates nothing (not parallel: AllocsPerRun
// counts the whole process).
func TestIdleScanAllocatesNothing(t *testing.T) {
	needUnixSockets(t)
	dir := filepath.Join(tempDir(t), "plugins")
	for _, p := range join(dir, "a.sock", "sub/b.sock", "sub/deep/c.sock", "other/d.sock") {
		socketFile(t, p)
	}
	age(t, dir) // no directory is racy
	s := mustNew(t, nil, dir)
	first := mustScan(t, s)
	if s.statPath == nil {
		t.Skip("no stat by path here: an idle scan opens each directory")
	}
	if !s.Settled(filepath.Join(dir, "a.sock")) {
		t.Skipf("%s is not settled (see Scanner.Settled): a scan reads it on a goroutine of its own", dir)
	}
	if n := testing.AllocsPerRun(20, func() { mustScan(t, s) }); n != 0 {
		t.Errorf("an idle scan allocates %v times, want 0", n)
	}
	if got := mustScan(t, s); !got.Same(first) || len(got.Entries) != 4 {
		t.Errorf("idle scan returned %v, want the first snapshot's 4 entries", paths(got))
	}
}
