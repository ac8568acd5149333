package scan

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeEpoch is the mtime of a new fake directory: 2026-01-01 UTC, in ns.
const fakeEpoch = 1767225600 * int64(time.Second)

// fakeTree is a plugin dir, /plugins, on a fake file system for tests of
// incremental scanning. Each directory has its own entry, whose Sys is its
// ID, so the test decides when a directory's stat changes; a change to a
// directory's listing does not change its stat unless the test touches it.
type fakeTree struct {
	t    *testing.T
	fsys fstest.MapFS
	f    *faults
	s    *Scanner
	now  time.Time // the Scanner's clock: an hour after fakeEpoch unless set
	ino  uint64    // the last inode number handed out
}

// newFakeTree returns a fake plugin dir holding sockets at the slash-separated
// paths rel, and a Scanner of it.
func newFakeTree(t *testing.T, log *slog.Logger, rel ...string) *fakeTree {
	f := &faults{open: make(map[string]error), read: make(map[string]error), stat: make(map[string]error)}
	ft := &fakeTree{t: t, fsys: fstest.MapFS{}, f: f, now: time.Unix(0, fakeEpoch).Add(time.Hour)}
	ft.mkdir(".")
	for _, r := range rel {
		ft.sock(r)
	}
	ft.s = newScanner([]string{filepath.FromSlash("/plugins")}, log, mapOpen(ft.fsys))
	ft.s.now = func() time.Time { return ft.now }
	// Directories are stat'ed by path, as on unix, through the fake's open.
	statByPath := statByOpen(ft.s.open)
	ft.s.statPath = func(zpath string, _, raw bool) (ID, error) { return statByPath(zpath[:len(zpath)-1], raw) }
	ft.f.wrap(ft.s)
	return ft
}

// abs returns the absolute path of rel.
func (ft *fakeTree) abs(rel string) string {
	return filepath.Join(filepath.FromSlash("/plugins"), filepath.FromSlash(rel))
}

func (ft *fakeTree) key(rel string) string { return path.Join("plugins", rel) }

// mkdir makes the directory rel, and any missing parent, with a new identity
// and mtime fakeEpoch.
func (ft *fakeTree) mkdir(rel string) {
	if rel != "." {
		if _, ok := ft.fsys[ft.key(path.Dir(rel))]; !ok {
			ft.mkdir(path.Dir(rel))
		}
	}
	ft.ino++
	ft.fsys[ft.key(rel)] = &fstest.MapFile{Mode: fs.ModeDir | 0o755, Sys: ID{Ino: ft.ino, Mtime: fakeEpoch}}
}

// sock binds a socket at rel, replacing any socket there with a new one,
// and makes any missing parent directory.
func (ft *fakeTree) sock(rel string) {
	if _, ok := ft.fsys[ft.key(path.Dir(rel))]; !ok {
		ft.mkdir(path.Dir(rel))
	}
	ft.ino++
	ft.fsys[ft.key(rel)] = &fstest.MapFile{Mode: fs.ModeSocket, Sys: ID{Ino: ft.ino}}
}

// rm removes rel and everything under it.
func (ft *fakeTree) rm(rel string) {
	k := ft.key(rel)
	for p := range ft.fsys {
		if p == k || strings.HasPrefix(p, k+"/") {
			delete(ft.fsys, p)
		}
	}
}

// touch moves the mtime of the directory rel on by a second, as a change
// made a while before the next scan does.
func (ft *fakeTree) touch(rel string) {
	f := ft.fsys[ft.key(rel)]
	id := f.Sys.(ID)
	id.Mtime += int64(time.Second)
	f.Sys = id
}

// setMtime sets the mtime of the directory rel.
func (ft *fakeTree) setMtime(rel string, t time.Time) {
	f := ft.fsys[ft.key(rel)]
	id := f.Sys.(ID)
	id.Mtime = t.UnixNano()
	f.Sys = id
}

// scan scans, and returns the snapshot and the directories read (rel paths,
// sorted).
func (ft *fakeTree) scan() (Snapshot, []string, error) {
	ft.t.Helper()
	ft.f.reads = make(map[string]int)
	snap, err := ft.s.Scan()
	var read []string
	for p, n := range ft.f.reads {
		if n != 1 {
			ft.t.Errorf("Scan() read %s %d times, want at most once", p, n)
		}
		r := strings.TrimPrefix(strings.TrimPrefix(filepath.ToSlash(p), "/plugins"), "/")
		if r == "" {
			r = "."
		}
		read = append(read, r)
	}
	slices.Sort(read)
	return snap, read, err
}

// oracle returns a full scan of the tree by a new Scanner.
func (ft *fakeTree) oracle() Snapshot {
	ft.t.Helper()
	return mustScan(ft.t, newScanner([]string{filepath.FromSlash("/plugins")}, nil, mapOpen(ft.fsys)))
}

// rels returns the paths of snap relative to /plugins, slash-separated.
func rels(snap Snapshot) []string {
	var rs []string
	for _, e := range snap.Entries {
		rs = append(rs, strings.TrimPrefix(filepath.ToSlash(e.Path), "/plugins/"))
	}
	return rs
}

// TestScanIncremental makes changes to a fake tree, one per scan, and checks
// that an incremental scan sees each, reads only the directories whose stat
// changed (and the racy ones, of which there are none here), agrees with a
// full scan by a new Scanner, and returns the previous Snapshot itself only
// when nothing changed.
func TestScanIncremental(t *testing.T) {
	t.Parallel()
	ft := newFakeTree(t, nil, "a.sock", "sub/b.sock", "sub/deep/c.sock", "other/d.sock")
	steps := []struct {
		name     string
		change   func()
		want     []string // paths of the snapshot
		read     []string // directories read
		replaced []string // paths Diff reports as Replaced
		same     bool     // the previous Snapshot comes back
	}{
		{
			name: "first scan reads everything",
			want: []string{"a.sock", "other/d.sock", "sub/b.sock", "sub/deep/c.sock"},
			read: []string{".", "other", "sub", "sub/deep"},
		},
		{
			name: "nothing changed",
			want: []string{"a.sock", "other/d.sock", "sub/b.sock", "sub/deep/c.sock"},
			same: true,
		},
		{
			name:   "socket added to a subdirectory",
			change: func() { ft.sock("sub/e.sock"); ft.touch("sub") },
			want:   []string{"a.sock", "other/d.sock", "sub/b.sock", "sub/deep/c.sock", "sub/e.sock"},
			read:   []string{"sub"},
		},
		{
			name:   "socket added two levels down",
			change: func() { ft.sock("sub/deep/f.sock"); ft.touch("sub/deep") },
			want:   []string{"a.sock", "other/d.sock", "sub/b.sock", "sub/deep/c.sock", "sub/deep/f.sock", "sub/e.sock"},
			read:   []string{"sub/deep"},
		},
		{
			name:   "socket removed",
			change: func() { ft.rm("a.sock"); ft.touch(".") },
			want:   []string{"other/d.sock", "sub/b.sock", "sub/deep/c.sock", "sub/deep/f.sock", "sub/e.sock"},
			read:   []string{"."},
		},
		{
			name:     "socket replaced at the same path",
			change:   func() { ft.sock("sub/b.sock"); ft.touch("sub") },
			want:     []string{"other/d.sock", "sub/b.sock", "sub/deep/c.sock", "sub/deep/f.sock", "sub/e.sock"},
			read:     []string{"sub"},
			replaced: []string{"sub/b.sock"},
		},
		{
			name:   "new subdirectory with sockets",
			change: func() { ft.sock("new/x.sock"); ft.sock("new/y/z.sock"); ft.touch(".") },
			want:   []string{"new/x.sock", "new/y/z.sock", "other/d.sock", "sub/b.sock", "sub/deep/c.sock", "sub/deep/f.sock", "sub/e.sock"},
			read:   []string{".", "new", "new/y"},
		},
		{
			name:   "subdirectory removed",
			change: func() { ft.rm("other"); ft.touch(".") },
			want:   []string{"new/x.sock", "new/y/z.sock", "sub/b.sock", "sub/deep/c.sock", "sub/deep/f.sock", "sub/e.sock"},
			read:   []string{"."},
		},
		{
			// The stat of each known subdirectory finds it gone.
			name:   "subdirectory removed, parent's stat unchanged",
			change: func() { ft.rm("sub/deep") },
			want:   []string{"new/x.sock", "new/y/z.sock", "sub/b.sock", "sub/e.sock"},
		},
		{
			// Only the identity tells them apart.
			name: "subdirectory replaced by another directory with the same mtime, parent's stat unchanged",
			change: func() {
				mtime := ft.fsys[ft.key("sub")].Sys.(ID).Mtime
				ft.rm("sub")
				ft.mkdir("sub")
				ft.sock("sub/g.sock")
				ft.setMtime("sub", time.Unix(0, mtime))
			},
			want: []string{"new/x.sock", "new/y/z.sock", "sub/g.sock"},
			read: []string{"sub"},
		},
		{
			name:   "subdirectory replaced by a socket",
			change: func() { ft.rm("new"); ft.sock("new"); ft.touch(".") },
			want:   []string{"new", "sub/g.sock"},
			read:   []string{"."},
		},
		{
			name:   "socket replaced by a subdirectory",
			change: func() { ft.rm("new"); ft.sock("new/h.sock"); ft.touch(".") },
			want:   []string{"new/h.sock", "sub/g.sock"},
			read:   []string{".", "new"},
		},
		{
			name:   "plugin dir removed",
			change: func() { ft.rm(".") },
		},
		{
			name: "plugin dir still missing",
			same: true,
		},
		{
			name:   "plugin dir created again",
			change: func() { ft.sock("z.sock") },
			want:   []string{"z.sock"},
			read:   []string{"."},
		},
		{
			// Read in full, again: the same entries.
			name:   "full scan",
			change: func() { ft.s.FullScanEvery = 1 },
			want:   []string{"z.sock"},
			read:   []string{"."},
			same:   true,
		},
	}
	var h history
	for _, st := range steps {
		if st.change != nil {
			st.change()
		}
		got := ft.check(t, st.name, st.want, st.read)
		if d := cmp.Diff(ft.oracle(), got); d != "" {
			t.Errorf("%s: Scan() differs from a full scan (-full +incremental):\n%s", st.name, d)
		}
		if d := cmp.Diff(st.replaced, rels(Snapshot{Entries: Diff(h.prev, got).Replaced})); d != "" {
			t.Errorf("%s: Diff() replaced (-want +got):\n%s", st.name, d)
		}
		h.add(t, st.name, got, st.same)
	}
	h.untouched(t)
}

// TestScanRacy changes a directory in the same timestamp granule as the
// change before it, just after a scan read it: its stat stays as it was.
func TestScanRacy(t *testing.T) {
	t.Parallel()
	ft := newFakeTree(t, nil, "a.sock")
	// Changed a second before the scan, within racySlack: racy.
	ft.setMtime(".", ft.now.Add(-time.Second))
	steps := []struct {
		name   string
		change func()
		want   []string
		read   []string
	}{
		{name: "first scan", want: []string{"a.sock"}, read: []string{"."}},
		{
			name:   "change in the same granule",
			change: func() { ft.sock("b.sock") },
			want:   []string{"a.sock", "b.sock"},
			read:   []string{"."},
		},
		{
			// Still racy at the read before: read once more.
			name:   "a minute later",
			change: func() { ft.now = ft.now.Add(time.Minute) },
			want:   []string{"a.sock", "b.sock"},
			read:   []string{"."},
		},
		{
			// No longer racy. A change that leaves the stat as it was, which
			// no real directory makes this late, is not seen...
			name:   "not racy",
			change: func() { ft.sock("c.sock") },
			want:   []string{"a.sock", "b.sock"},
		},
		{
			// ...until the directory's stat changes.
			name:   "stat changed",
			change: func() { ft.setMtime(".", ft.now.Add(-time.Millisecond)) },
			want:   []string{"a.sock", "b.sock", "c.sock"},
			read:   []string{"."},
		},
		{
			name:   "racy again",
			change: func() { ft.rm("a.sock") },
			want:   []string{"b.sock", "c.sock"},
			read:   []string{"."},
		},
	}
	for _, st := range steps {
		if st.change != nil {
			st.change()
		}
		ft.check(t, st.name, st.want, st.read)
	}
}

// TestScanRacyRule checks where racy ends: a directory whose mtime is at
// most racySlack before the clock at the start of the scan that read it is
// read again by the next scan; fineRacySlack when the mtime has a
// sub-second part, as on a file system with fine timestamps.
func TestScanRacyRule(t *testing.T) {
	t.Parallel()
	const fine = 123456789 * time.Nanosecond // a sub-second part; the clock has none
	tests := []struct {
		name string
		age  time.Duration // clock at the scan less the directory's mtime
		racy bool
	}{
		{name: "mtime in the future", age: -time.Hour, racy: true},
		{name: "mtime now", age: 0, racy: true},
		{name: "just inside", age: racySlack - time.Second, racy: true},
		{name: "at the slack", age: racySlack, racy: true},
		{name: "just outside", age: racySlack + time.Second, racy: false},
		{name: "an hour ago", age: time.Hour, racy: false},
		{name: "fine, in the future", age: -time.Hour - fine, racy: true},
		{name: "fine, just inside", age: fineRacySlack - 1, racy: true},
		{name: "fine, at the slack", age: fineRacySlack, racy: true},
		{name: "fine, just outside", age: fineRacySlack + 1, racy: false},
		{name: "fine, a second ago", age: time.Second - fine, racy: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ft := newFakeTree(t, nil, "a.sock", "sub/b.sock")
			ft.setMtime(".", ft.now.Add(-tc.age))
			ft.setMtime("sub", ft.now.Add(-time.Hour))
			ft.scan()
			_, read, _ := ft.scan()
			var want []string
			if tc.racy {
				want = []string{"."}
			}
			if d := cmp.Diff(want, read); d != "" {
				t.Errorf("second scan read (-want +got):\n%s", d)
			}
		})
	}
}

// TestScanFullScanEvery counts the reads of an unchanged tree.
func TestScanFullScanEvery(t *testing.T) {
	t.Parallel()
	tests := []struct {
		n    int
		want []int // scans that read the tree
	}{
		{n: 0, want: []int{1}},
		{n: -1, want: []int{1}},
		{n: 1, want: []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{n: 3, want: []int{1, 4, 7, 10}},
		{n: 9, want: []int{1, 10}},
		{n: DefaultFullScanEvery, want: []int{1}},
	}
	for _, tc := range tests {
		ft := newFakeTree(t, nil, "a.sock", "sub/b.sock", "sub/deep/c.sock")
		ft.s.FullScanEvery = tc.n
		var got []int
		for i := 1; i <= 10; i++ {
			snap, read, err := ft.scan()
			if err != nil || len(snap.Entries) != 3 {
				t.Fatalf("FullScanEvery = %d: scan %d = %v, %v; want 3 entries", tc.n, i, snap, err)
			}
			switch {
			case slices.Equal(read, []string{".", "sub", "sub/deep"}):
				got = append(got, i)
			case read != nil:
				t.Errorf("FullScanEvery = %d: scan %d read %v, want all or nothing", tc.n, i, read)
			}
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("FullScanEvery = %d: scans that read the tree (-want +got):\n%s", tc.n, d)
		}
	}
	if got := mustNew(t, nil, tempDir(t)).FullScanEvery; got != DefaultFullScanEvery {
		t.Errorf("New().FullScanEvery = %d, want %d", got, DefaultFullScanEvery)
	}
}

// TestScanKeepsUnreadable checks that a directory that was read and then
// cannot be read or stat'ed keeps its entries, is logged once, is tried again
// every scan, and is read again when it recovers; and that one that is gone
// does not keep them.
func TestScanKeepsUnreadable(t *testing.T) {
	t.Parallel()
	log, buf := testLog(t)
	ft := newFakeTree(t, log, "a.sock", "bad/b.sock", "bad/deeper/c.sock", "ok/d.sock")
	root, bad := ft.abs("."), ft.abs("bad")
	all := []string{"a.sock", "bad/b.sock", "bad/deeper/c.sock", "ok/d.sock"}
	steps := []struct {
		name    string
		change  func()
		want    []string
		read    []string
		wantErr error // of Scan, for the plugin dir
		logs    map[string]int
	}{
		{name: "first scan", want: all, read: []string{".", "bad", "bad/deeper", "ok"}},
		{
			// Its stat changes, as chmod changes the ctime.
			name:   "read fails",
			change: func() { ft.f.read[bad] = syscall.EACCES; ft.touch("bad") },
			want:   all,
			read:   []string{"bad"},
			logs:   map[string]int{"cannot read directory": 1},
		},
		{
			// Tried again. A socket removed meanwhile cannot be seen yet, and
			// the subdirectory, which the scan reaches through it, is kept as
			// it was too.
			name: "read still fails",
			change: func() {
				ft.rm("bad/b.sock")
				ft.touch("bad")
				ft.sock("bad/deeper/e.sock")
				ft.touch("bad/deeper")
			},
			want: all,
			read: []string{"bad"},
		},
		{
			name:   "read succeeds",
			change: func() { delete(ft.f.read, bad) },
			want:   []string{"a.sock", "bad/deeper/c.sock", "bad/deeper/e.sock", "ok/d.sock"},
			read:   []string{"bad", "bad/deeper"},
			logs:   map[string]int{"directory readable again": 1},
		},
		{
			name:   "open fails",
			change: func() { ft.f.open[bad] = syscall.EPERM; ft.touch("bad") },
			want:   []string{"a.sock", "bad/deeper/c.sock", "bad/deeper/e.sock", "ok/d.sock"},
			logs:   map[string]int{"cannot read directory": 1},
		},
		{
			name:   "stat fails",
			change: func() { delete(ft.f.open, bad); ft.f.stat[bad] = syscall.EIO },
			want:   []string{"a.sock", "bad/deeper/c.sock", "bad/deeper/e.sock", "ok/d.sock"},
		},
		{
			name:   "stat succeeds",
			change: func() { delete(ft.f.stat, bad) },
			want:   []string{"a.sock", "bad/deeper/c.sock", "bad/deeper/e.sock", "ok/d.sock"},
			read:   []string{"bad"},
			logs:   map[string]int{"directory readable again": 1},
		},
		{
			name:   "socket stat fails",
			change: func() { ft.f.stat[ft.abs("a.sock")] = syscall.EIO; ft.touch(".") },
			want:   []string{"a.sock", "bad/deeper/c.sock", "bad/deeper/e.sock", "ok/d.sock"},
			read:   []string{"."},
			logs:   map[string]int{"cannot stat socket": 1},
		},
		{
			name:    "plugin dir read fails",
			change:  func() { delete(ft.f.stat, ft.abs("a.sock")); ft.f.read[root] = syscall.EIO; ft.touch(".") },
			want:    []string{"a.sock", "bad/deeper/c.sock", "bad/deeper/e.sock", "ok/d.sock"},
			read:    []string{"."},
			wantErr: syscall.EIO,
		},
		{
			name:    "plugin dir open fails",
			change:  func() { delete(ft.f.read, root); ft.f.open[root] = syscall.EACCES },
			want:    []string{"a.sock", "bad/deeper/c.sock", "bad/deeper/e.sock", "ok/d.sock"},
			wantErr: syscall.EACCES,
		},
		{
			name:   "plugin dir recovers",
			change: func() { delete(ft.f.open, root) },
			want:   []string{"a.sock", "bad/deeper/c.sock", "bad/deeper/e.sock", "ok/d.sock"},
			read:   []string{"."},
		},
		{
			// A failing directory that is then gone does not keep its entries.
			name:   "gone",
			change: func() { ft.f.read[bad] = syscall.EACCES; ft.touch("bad"); ft.rm("ok") },
			want:   []string{"a.sock", "bad/deeper/c.sock", "bad/deeper/e.sock"},
			read:   []string{"bad"},
			logs:   map[string]int{"cannot read directory": 1},
		},
		{
			name:   "gone while failing",
			change: func() { ft.rm("bad") },
			want:   []string{"a.sock"},
		},
	}
	logged := make(map[string]int)
	for _, st := range steps {
		if st.change != nil {
			st.change()
		}
		got, read, err := ft.scan()
		if pe, ok := errors.AsType[*fs.PathError](err); st.wantErr != nil && (!ok || pe.Path != root || !errors.Is(err, st.wantErr)) {
			t.Errorf("%s: Scan() error = %v, want an *fs.PathError for %s wrapping %v", st.name, err, root, st.wantErr)
		} else if st.wantErr == nil && err != nil {
			t.Errorf("%s: Scan() error = %v", st.name, err)
		}
		if d := cmp.Diff(st.want, rels(got)); d != "" {
			t.Errorf("%s: Scan() paths (-want +got):\n%s", st.name, d)
		}
		if d := cmp.Diff(st.read, read); d != "" {
			t.Errorf("%s: directories read (-want +got):\n%s", st.name, d)
		}
		for _, msg := range []string{"cannot read directory", "directory readable again", "cannot stat socket"} {
			logged[msg] += st.logs[msg]
			if n := count(buf, msg); n != logged[msg] {
				t.Errorf("%s: logged %q %d times, want %d", st.name, msg, n, logged[msg])
			}
		}
	}
	if t.Failed() {
		t.Logf("log:\n%s", buf)
	}
}

// TestScanRootsInOrder checks that the entries of several plugin dirs come
// out sorted, whether or not the dirs' own order sorts them.
func TestScanRootsInOrder(t *testing.T) {
	t.Parallel()
	sock := func(n uint64) *fstest.MapFile { return &fstest.MapFile{Mode: fs.ModeSocket, Sys: ID{Ino: n}} }
	fsys := fstest.MapFS{
		"p/a/x.sock":   sock(1),
		"p/a-b/y.sock": sock(2), // "/p/a-b/" sorts before "/p/a/"
		"p/a.sock":     sock(3), // not in a plugin dir
		"q/z.sock":     sock(4),
	}
	abs := func(rel string) string { return filepath.Join(filepath.FromSlash("/"), filepath.FromSlash(rel)) }
	s := newScanner([]string{abs("q"), abs("p/a"), abs("p/a-b")}, nil, mapOpen(fsys))
	want := []string{abs("p/a-b/y.sock"), abs("p/a/x.sock"), abs("q/z.sock")}
	var prev Snapshot
	for i := range 2 {
		got := mustScan(t, s)
		if d := cmp.Diff(want, paths(got)); d != "" {
			t.Errorf("Scan() paths (-want +got):\n%s", d)
		}
		if i > 0 && !prev.Same(got) {
			t.Errorf("Scan() with nothing changed returned new entries, want the previous ones")
		}
		prev = got
	}
}

// age sets the access and modification times of dir and everything in it
// to an hour ago, so that no directory is racy and a socket bound again gets
// a new mtime even on a coarse file system clock. It fails the test if it
// cannot age a directory; some systems cannot set a socket's times.
func age(t testing.TB, dir string) {
	t.Helper()
	hourAgo := time.Now().Add(-time.Hour)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Chtimes(p, hourAgo, hourAgo); err != nil {
			if d.IsDir() {
				return err
			}
			t.Logf("cannot age %s: %v", p, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestScanIncrementalReal makes changes to a real plugin dir, several
// between some scans, and checks that the incremental scan sees them and
// agrees with a full scan by a new Scanner.
func TestScanIncrementalReal(t *testing.T) {
	t.Parallel()
	needUnixSockets(t)
	root := tempDir(t)
	dir := filepath.Join(root, "plugins")
	in := func(rel string) string { return filepath.Join(dir, filepath.FromSlash(rel)) }
	for _, p := range join(dir, "a.sock", "sub/b.sock", "sub/deep/c.sock") {
		socketFile(t, p)
	}
	age(t, dir)
	log, buf := testLog(t)
	s := mustNew(t, log, dir)
	f := &faults{}
	f.wrap(s)
	rebind := func(rel string) {
		if err := os.Remove(in(rel)); err != nil {
			t.Fatal(err)
		}
		socketFile(t, in(rel))
	}
	steps := []struct {
		name     string
		change   func()
		want     []string // paths relative to dir
		replaced []string
		read     []string // directories read, relative to dir; checked if not nil
	}{
		{
			name: "first scan",
			want: []string{"a.sock", "sub/b.sock", "sub/deep/c.sock"},
			read: []string{".", "sub", "sub/deep"},
		},
		{
			name: "nothing changed",
			want: []string{"a.sock", "sub/b.sock", "sub/deep/c.sock"},
			read: []string{},
		},
		{
			name:   "socket added to a subdirectory",
			change: func() { socketFile(t, in("sub/e.sock")) },
			want:   []string{"a.sock", "sub/b.sock", "sub/deep/c.sock", "sub/e.sock"},
			read:   []string{"sub"},
		},
		{
			// Three changes to one directory in quick succession, the first
			// right after the scan before read it.
			name:     "socket replaced and another added",
			change:   func() { rebind("a.sock"); socketFile(t, in("f.sock")) },
			want:     []string{"a.sock", "f.sock", "sub/b.sock", "sub/deep/c.sock", "sub/e.sock"},
			replaced: []string{"a.sock"},
		},
		{
			name:     "socket replaced at the same path",
			change:   func() { rebind("sub/b.sock") },
			want:     []string{"a.sock", "f.sock", "sub/b.sock", "sub/deep/c.sock", "sub/e.sock"},
			replaced: []string{"sub/b.sock"},
		},
		{
			name:   "socket removed",
			change: func() { os.Remove(in("f.sock")) },
			want:   []string{"a.sock", "sub/b.sock", "sub/deep/c.sock", "sub/e.sock"},
		},
		{
			name:   "new subdirectory with sockets",
			change: func() { socketFile(t, in("new/x.sock")); socketFile(t, in("new/y/z.sock")) },
			want:   []string{"a.sock", "new/x.sock", "new/y/z.sock", "sub/b.sock", "sub/deep/c.sock", "sub/e.sock"},
		},
		{
			name:   "subdirectory removed",
			change: func() { os.RemoveAll(in("sub/deep")) },
			want:   []string{"a.sock", "new/x.sock", "new/y/z.sock", "sub/b.sock", "sub/e.sock"},
		},
		{
			name: "subdirectory replaced by another directory",
			change: func() {
				if err := os.Rename(in("sub"), in(".sub-old")); err != nil {
					t.Fatal(err)
				}
				socketFile(t, in("sub/g.sock"))
			},
			want: []string{"a.sock", "new/x.sock", "new/y/z.sock", "sub/g.sock"},
		},
		{
			name:   "plugin dir removed",
			change: func() { os.RemoveAll(dir) },
		},
		{
			name:   "plugin dir created again",
			change: func() { socketFile(t, in("z.sock")) },
			want:   []string{"z.sock"},
		},
	}
	var prev Snapshot
	for _, st := range steps {
		if st.change != nil {
			st.change()
		}
		f.reads = make(map[string]int)
		got := mustScan(t, s)
		var rel []string
		for _, e := range got.Entries {
			r, _ := filepath.Rel(dir, e.Path)
			rel = append(rel, filepath.ToSlash(r))
		}
		if d := cmp.Diff(st.want, rel); d != "" {
			t.Errorf("%s: Scan() paths (-want +got):\n%s", st.name, d)
		}
		if d := cmp.Diff(mustScan(t, mustNew(t, nil, dir)), got); d != "" {
			t.Errorf("%s: Scan() differs from a full scan (-full +incremental):\n%s", st.name, d)
		}
		if d := cmp.Diff(join(dir, st.replaced...), paths(Snapshot{Entries: Diff(prev, got).Replaced})); d != "" {
			t.Errorf("%s: Diff() replaced (-want +got):\n%s", st.name, d)
		}
		if st.read != nil {
			read := []string{}
			for p := range f.reads {
				r, _ := filepath.Rel(dir, p)
				read = append(read, filepath.ToSlash(r))
			}
			slices.Sort(read)
			if d := cmp.Diff(st.read, read); d != "" {
				t.Errorf("%s: directories read (-want +got):\n%s", st.name, d)
			}
		}
		prev = got
	}
	wantLogged(t, buf, map[string]int{"plugin directory missing": 1, "plugin directory present again": 1})
}

// TestScanTwiceInATickReal changes a directory twice between two scans, the
// first change right after the scan before read it, round after round: on a
// file system with a coarse clock, both changes can fall in the granule of
// that read.
func TestScanTwiceInATickReal(t *testing.T) {
	t.Parallel()
	needUnixSockets(t)
	dir := tempDir(t)
	x := filepath.Join(dir, "x.sock")
	socketFile(t, x)
	s := mustNew(t, nil, dir)
	prev := mustScan(t, s)
	for i := range 20 {
		added := filepath.Join(dir, fmt.Sprintf("s%02d.sock", i))
		socketFile(t, added)
		if err := os.Remove(x); err != nil {
			t.Fatal(err)
		}
		socketFile(t, x)
		got := mustScan(t, s)
		if d := cmp.Diff(mustScan(t, mustNew(t, nil, dir)), got); d != "" {
			t.Fatalf("round %d: Scan() differs from a full scan (-full +incremental):\n%s", i, d)
		}
		if d := cmp.Diff([]string{added}, paths(Snapshot{Entries: Diff(prev, got).Added})); d != "" {
			t.Errorf("round %d: Diff() added (-want +got):\n%s", i, d)
		}
		prev = got
	}
}

// TestScanReadsOnlyChangedDirs checks, on the real file system and with no
// sockets (so that it runs under wine too), that an incremental scan reads
// only the directories whose stat changed.
func TestScanReadsOnlyChangedDirs(t *testing.T) {
	t.Parallel()
	dir := tempDir(t)
	in := func(rel string) string { return filepath.Join(dir, filepath.FromSlash(rel)) }
	for _, rel := range []string{"a", "sub/b", "sub/deep/c", "other/d"} {
		writeFile(t, in(rel))
	}
	age(t, dir)
	s := mustNew(t, nil, dir)
	// With the clock an hour ahead, no change is racy, and each changed
	// directory is read once. Each changes once at most, so no change can
	// fall in the timestamp granule of the one before.
	s.now = func() time.Time { return time.Now().Add(time.Hour) }
	f := &faults{}
	f.wrap(s)
	steps := []struct {
		name   string
		change func()
		read   []string
	}{
		{name: "first scan", read: []string{".", "other", "sub", "sub/deep"}},
		{name: "nothing changed", read: []string{}},
		{name: "file added", change: func() { writeFile(t, in("sub/deep/e")) }, read: []string{"sub/deep"}},
		{name: "directory added", change: func() { writeFile(t, in("other/new/f")) }, read: []string{"other", "other/new"}},
		{
			name: "directory replaced",
			change: func() {
				if err := os.Rename(in("sub/deep"), in("deep")); err != nil {
					t.Fatal(err)
				}
				if err := os.Mkdir(in("sub/deep"), 0o755); err != nil {
					t.Fatal(err)
				}
			},
			read: []string{".", "deep", "sub", "sub/deep"},
		},
		{name: "full scan", change: func() { s.FullScanEvery = 1 }, read: []string{".", "deep", "other", "other/new", "sub", "sub/deep"}},
	}
	for _, st := range steps {
		if st.change != nil {
			st.change()
		}
		f.reads = make(map[string]int)
		mustScan(t, s)
		read := []string{}
		for p := range f.reads {
			r, _ := filepath.Rel(dir, p)
			read = append(read, filepath.ToSlash(r))
		}
		slices.Sort(read)
		if d := cmp.Diff(st.read, read); d != "" {
			t.Errorf("%s: directories read (-want +got):\n%s", st.name, d)
		}
	}
}

// TestScanModel makes random changes to a fake tree whose directories get
// their mtime from a clock of coarse granularity, as a real file system's
// do, so that many changes leave a directory's stat as it was; scans at
// random times must agree with a full scan all the same, whether they
// return the previous Snapshot or a new one.
func TestScanModel(t *testing.T) {
	t.Parallel()
	for _, granularity := range []time.Duration{1, time.Second, 2 * time.Second} {
		t.Run(granularity.String(), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(1, uint64(granularity)))
			ft := newFakeTree(t, nil)
			ft.s.FullScanEvery = 0
			// changed sets the mtime of the directory rel, whose listing
			// changed just now.
			changed := func(rel string) {
				if _, ok := ft.fsys[ft.key(rel)]; ok {
					ft.setMtime(rel, ft.now.Truncate(granularity))
				}
			}
			dirs := func() []string {
				var ds []string
				for p, f := range ft.fsys {
					if f.Mode.IsDir() {
						ds = append(ds, strings.TrimPrefix(strings.TrimPrefix(p, "plugins"), "/"))
					}
				}
				slices.Sort(ds)
				return ds
			}
			names := []string{"a", "b", "c.sock", "d"}
			var prev Snapshot
			scans, same := 0, 0
			for i := range 3000 {
				ft.now = ft.now.Add(time.Duration(rng.Int64N(int64(700 * time.Millisecond))))
				ds := dirs()
				if len(ds) == 0 { // the plugin dir was removed
					if rng.IntN(4) == 0 {
						ft.mkdir(".")
						changed(".")
					}
					continue
				}
				d := ds[rng.IntN(len(ds))]
				if d == "" {
					d = "."
				}
				rel := path.Join(d, names[rng.IntN(len(names))])
				f, exists := ft.fsys[ft.key(rel)]
				switch op := rng.IntN(10); {
				case op < 3 && (!exists || f.Mode&fs.ModeSocket != 0): // bind, or bind again
					ft.sock(rel)
					changed(d)
				case op < 5 && !exists && strings.Count(rel, "/") < 3: // mkdir
					ft.mkdir(rel)
					ft.setMtime(rel, ft.now.Truncate(granularity))
					changed(d)
				case op < 7 && exists: // remove
					ft.rm(rel)
					changed(d)
				case op < 8 && exists && f.Mode.IsDir(): // replace a directory by an empty one
					ft.rm(rel)
					ft.mkdir(rel)
					ft.setMtime(rel, ft.now.Truncate(granularity))
					changed(d)
				case op < 9 && d == "." && rng.IntN(20) == 0: // remove the plugin dir
					ft.rm(".")
				default:
					got, _, err := ft.scan()
					if err != nil {
						t.Fatalf("step %d: Scan() error = %v", i, err)
					}
					if d := cmp.Diff(ft.oracle(), got); d != "" {
						t.Fatalf("step %d: Scan() differs from a full scan (-full +incremental):\n%s", i, d)
					}
					scans++
					if len(got.Entries) > 0 && prev.Same(got) {
						same++
					}
					prev = got
				}
			}
			// Both kinds of result were checked.
			if same == 0 || same == scans {
				t.Errorf("%d of %d scans returned the previous entries, want some", same, scans)
			}
			t.Logf("%d of %d scans returned the previous entries", same, scans)
		})
	}
}

// check scans ft and compares the paths found and the directories read.
func (ft *fakeTree) check(t *testing.T, name string, want, read []string) Snapshot {
	t.Helper()
	got, gotRead, err := ft.scan()
	if err != nil {
		t.Fatalf("%s: Scan() error = %v", name, err)
	}
	if d := cmp.Diff(want, rels(got)); d != "" {
		t.Errorf("%s: Scan() paths (-want +got):\n%s", name, d)
	}
	if d := cmp.Diff(read, gotRead); d != "" {
		t.Errorf("%s: directories read (-want +got):\n%s", name, d)
	}
	return got
}
