package scan

import (
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/fstest"
	"testing/synctest"
	"time"
)

// TestAllLocal: a plugin dir is settled only when the mount holding it,
// and every mount below it, is of a local file system type.
func TestAllLocal(t *testing.T) {
	t.Parallel()
	base := []mount{{"/", "ext4"}, {"/proc", "proc"}, {"/run", "tmpfs"}, {"/mnt/nfs", "nfs4"}}
	tests := []struct {
		name string
		root string
		more []mount
		want bool
	}{
		{"on the root file system", "/var/lib/plugins", nil, true},
		{"on a tmpfs", "/run/plugins", nil, true},
		{"below NFS", "/mnt/nfs/plugins", nil, false},
		{"a NFS mount's sibling", "/mnt/nfsx", nil, true},
		{"FUSE below it", "/run/plugins", []mount{{"/run/plugins/sub", "fuse"}}, false},
		{"FUSE deep below it", "/run/plugins", []mount{{"/run/plugins/a/b", "fuse.sshfs"}}, false},
		{"FUSE over it", "/run/plugins", []mount{{"/run/plugins", "fuse"}}, false},
		{"FUSE over its parent", "/run/plugins", []mount{{"/run", "fuse"}}, false},
		{"tmpfs over FUSE over it", "/run/plugins", []mount{{"/run/plugins", "fuse"}, {"/run/plugins", "tmpfs"}}, false},
		{"FUSE beside it", "/run/plugins", []mount{{"/run/pluginsx", "fuse"}, {"/run/other/plugins", "fuse"}}, true},
		{"a local mount below it", "/run/plugins", []mount{{"/run/plugins/sub", "tmpfs"}}, true},
		{"a type it cannot parse below it", "/run/plugins", []mount{{"/run/plugins/sub", ""}}, false},
		{"autofs below it", "/run/plugins", []mount{{"/run/plugins/sub", "autofs"}}, false},
	}
	for _, tc := range tests {
		ms := append(slices.Clone(base), tc.more...)
		if got := allLocal(tc.root, ms); got != tc.want {
			t.Errorf("%s: allLocal(%s, %v) = %v, want %v", tc.name, tc.root, ms, got, tc.want)
		}
	}
	if allLocal("/x", nil) {
		t.Error("allLocal with no mount table = true, want false")
	}
}

// fakeMounts is a mount table whose changes the test announces.
type fakeMounts struct {
	mu     sync.Mutex
	ms     []mount
	signal bool // a change not yet asked about
	reads  int  // reads of the table
}

func (f *fakeMounts) changed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.signal
	f.signal = false
	return c
}

func (f *fakeMounts) table() ([]mount, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return slices.Clone(f.ms), nil
}

// set changes the table and signals it.
func (f *fakeMounts) set(ms ...mount) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ms, f.signal = ms, true
}

// rawStats records, for each stat by path, whether it was a raw one.
type rawStats struct {
	mu   sync.Mutex
	raws []bool
}

func (r *rawStats) wrap(s *Scanner) {
	statPath := s.statPath
	s.statPath = func(zpath string, follow, raw bool) (ID, error) {
		r.mu.Lock()
		r.raws = append(r.raws, raw)
		r.mu.Unlock()
		return statPath(zpath, follow, raw)
	}
}

// take returns the stats recorded since the last take: how many were raw,
// and how many not.
func (r *rawStats) take() (raw, usual int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.raws {
		if b {
			raw++
		} else {
			usual++
		}
	}
	r.raws = nil
	return raw, usual
}

// TestMountChangeEndsRawStats: after the mount table changes, no idle scan
// stats with a raw system call until the table, read again, shows that
// every file system below the plugin dir is local; the table is read only
// when it changed.
func TestMountChangeEndsRawStats(t *testing.T) {
	needUnixSockets(t)
	dir := filepath.Join(tempDir(t), "plugins")
	for _, p := range join(dir, "a.sock", "sub/b.sock", "sub/deep/c.sock") {
		socketFile(t, p)
	}
	age(t, dir)
	s := mustNew(t, nil, dir)
	if s.statPath == nil {
		t.Skip("no stat by path here")
	}
	mounts := &fakeMounts{ms: []mount{{"/", "ext4"}}}
	s.settled = newMountGate([]string{dir}, mounts.changed, mounts.table).rootSettled
	var stats rawStats
	stats.wrap(s)
	mustScan(t, s)
	stats.take()
	scan := func(when string, wantRaw bool) {
		t.Helper()
		if got := paths(mustScan(t, s)); len(got) != 3 {
			t.Fatalf("%s: Scan = %v, want 3 sockets", when, got)
		}
		raw, usual := stats.take()
		if wantRaw && (raw != 3 || usual != 0) || !wantRaw && (raw != 0 || usual != 3) {
			t.Errorf("%s: %d raw stats and %d usual ones, want all 3 raw: %v", when, raw, usual, wantRaw)
		}
	}
	scan("settled", true)
	mounts.set(mount{"/", "ext4"}, mount{filepath.Join(dir, "sub"), "fuse"})
	scan("right after a FUSE mount below the dir", false)
	scan("while it stays", false)
	mounts.set(mount{"/", "ext4"})
	scan("once it is gone", true)
	mounts.mu.Lock()
	reads := mounts.reads
	mounts.mu.Unlock()
	scan("again", true)
	if mounts.reads != reads {
		t.Errorf("the mount table was read %d times with no change signalled, want 0", mounts.reads-reads)
	}
	if want := 3; reads != want {
		t.Errorf("the mount table was read %d times, want %d: once at the start and once per change", reads, want)
	}
}

// TestStalledRootAlone: a plugin dir that is not settled and whose read
// hangs delays only itself: the first Scan waits stallAfter for it, later
// ones not at all, the other dir's changes are seen meanwhile, the stalled
// dir keeps the entries of its last read and is reported as a
// *StallError, and its read's result is taken once it returns.
func TestStalledRootAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sock := &fstest.MapFile{Mode: fs.ModeSocket, Sys: ID{Ino: 1}}
		fsys := fstest.MapFS{"a/x.sock": sock, "b/y.sock": sock}
		open := mapOpen(fsys)
		var mu sync.Mutex
		var hang chan struct{} // while not nil, opening /a waits for it
		s := newScanner([]string{filepath.FromSlash("/a"), filepath.FromSlash("/b")}, nil, func(p string, raw bool) (dir, error) {
			mu.Lock()
			h := hang
			mu.Unlock()
			if h != nil && filepath.ToSlash(p) == "/a" {
				<-h
			}
			return open(p, raw)
		})
		s.FullScanEvery = 1 // the map's directories have no stat to compare
		s.settled = func(int) bool { return false }
		a := filepath.FromSlash("/a")
		want := func(when string, snap Snapshot, rel ...string) {
			t.Helper()
			if got, w := paths(snap), join(string(filepath.Separator), rel...); !slices.Equal(got, w) {
				t.Errorf("%s: Scan = %v, want %v", when, got, w)
			}
		}
		if snap, err := s.Scan(); err != nil {
			t.Fatal(err)
		} else {
			want("first", snap, "a/x.sock", "b/y.sock")
		}

		h := make(chan struct{})
		mu.Lock()
		hang = h
		mu.Unlock()
		fsys["b/z.sock"] = sock
		fsys["a/new.sock"] = sock
		start := time.Now()
		snap, err := s.Scan()
		if d := time.Since(start); d != stallAfter {
			t.Errorf("the Scan that met the hang took %v, want stallAfter (%v)", d, stallAfter)
		}
		want("hung", snap, "a/x.sock", "b/y.sock", "b/z.sock")
		var se *StallError
		if !errors.As(err, &se) || se.Path != a || !se.Since.Equal(start) {
			t.Errorf("hung: Scan error = %v, want a *StallError for %s since %v", err, a, start)
		}

		start = time.Now()
		delete(fsys, "b/y.sock")
		snap, err = s.Scan()
		if d := time.Since(start); d != 0 {
			t.Errorf("a Scan while the hang lasts took %v, want no wait", d)
		}
		want("still hung", snap, "a/x.sock", "b/z.sock")
		if !errors.As(err, &se) || se.Path != a {
			t.Errorf("still hung: Scan error = %v, want a *StallError for %s", err, a)
		}

		close(h)
		synctest.Wait()
		mu.Lock()
		hang = nil
		mu.Unlock()
		snap, err = s.Scan()
		if err != nil {
			t.Errorf("after the hang: Scan error = %v, want nil", err)
		}
		want("after the hang", snap, "a/new.sock", "a/x.sock", "b/z.sock")
	})
}

// TestSettledPath: Settled asks the mount gate of the innermost plugin dir
// a path is below, and is false below none.
func TestSettledPath(t *testing.T) {
	t.Parallel()
	var roots []string
	for _, r := range []string{"/p", "/p/inner", "/q"} {
		roots = append(roots, filepath.FromSlash(r))
	}
	s := newScanner(roots, nil, mapOpen(fstest.MapFS{}))
	s.settled = func(i int) bool { return s.roots[i].path != filepath.FromSlash("/p/inner") }
	tests := []struct {
		path string
		want bool
	}{
		{"/p/a.sock", true},
		{"/p/inner/a.sock", false},
		{"/q/x/a.sock", true},
		{"/pq/a.sock", false},
		{"/other/a.sock", false},
	}
	for _, tc := range tests {
		if got := s.Settled(filepath.FromSlash(tc.path)); got != tc.want {
			t.Errorf("Settled(%s) = %v, want %v", tc.path, got, tc.want)
		}
	}
}
