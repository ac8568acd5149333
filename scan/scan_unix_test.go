//go:build unix

package scan

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// TestScanIgnores checks that FIFOs, regular files and symlinks are not
// reported (devices: TestScanIgnoresDevice).
// The scan completing at all shows that no FIFO was opened: opening one that
// has no writer blocks.
func TestScanIgnores(t *testing.T) {
	t.Parallel()
	root := tempDir(t)
	dir := filepath.Join(root, "plugins")
	outside := filepath.Join(root, "outside")
	socketFile(t, filepath.Join(dir, "a.sock"))
	socketFile(t, filepath.Join(outside, "real.sock"))
	socketFile(t, filepath.Join(outside, "sub", "real.sock"))
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range join(dir, "fifo", "sub/fifo.sock") {
		if err := unix.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"link.sock":      filepath.Join(outside, "real.sock"),
		"sub/link.sock":  "../a.sock",
		"linkdir":        outside,
		"sub/linkdir":    "..", // a loop, were it followed
		"dangling.sock":  filepath.Join(root, "nothing"),
		"sub/self":       "self",
		"sub/relsub.dir": "../../outside/sub",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, filepath.FromSlash(name))); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(dir, "file.sock"))

	s := mustNew(t, nil, dir)
	if d := cmp.Diff(join(dir, "a.sock"), paths(mustScan(t, s))); d != "" {
		t.Errorf("Scan() paths (-want +got):\n%s", d)
	}
}

func TestNewDirMode(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(tempDir(t), "a", "b")
	mustNew(t, nil, dir)
	for _, p := range []string{dir, filepath.Dir(dir)} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		// 0750 less the umask.
		if perm := fi.Mode().Perm(); perm&^0o750 != 0 || perm&0o700 != 0o700 {
			t.Errorf("New made %s with mode %v, want 0750 less the umask", p, perm)
		}
	}
}

// TestScanRebind binds a socket again and again at the same path. ext4
// hands out the same inode every time, so the ID must differ by the times.
//
// With a coarse file system clock (Linux before 6.13, whose multigrain
// timestamps are fine-grained once a scan has looked), two binds within one
// tick get the same inode and the same times: no stat-based ID can tell them
// apart. Such rounds are counted, not failed; a round whose stat data differ
// must give a different ID.
func TestScanRebind(t *testing.T) {
	t.Parallel()
	root := tempDir(t)
	p := filepath.Join(root, "a.sock")
	s := mustNew(t, nil, root)
	var prev ID
	var prevStat unix.Stat_t
	same, inodes := 0, make(map[uint64]bool)
	for i := range 20 {
		socketFile(t, p)
		got := mustScan(t, s)
		if len(got.Entries) != 1 {
			t.Fatalf("round %d: Scan() = %v, want one entry", i, got)
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		id := got.Entries[0].ID
		if i > 0 && id == prev {
			if st.Ino == prevStat.Ino && st.Mtim == prevStat.Mtim && st.Ctim == prevStat.Ctim {
				same++
			} else {
				t.Errorf("round %d: rebound socket has the same ID %+v, though its stat data changed", i, id)
			}
		}
		prev, prevStat = id, st
		inodes[uint64(st.Ino)] = true
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("20 binds used %d inodes", len(inodes))
	if same > 0 {
		t.Logf("%d of 19 rebinds had the same inode and times as the one before (coarse file system clock)", same)
	}
}

// TestScanSubdirBecomesSymlink replaces a subdirectory with a symlink
// between the directory read and the open: the link is not followed, and
// that is no error.
func TestScanSubdirBecomesSymlink(t *testing.T) {
	t.Parallel()
	root := tempDir(t)
	plugins, outside := filepath.Join(root, "plugins"), filepath.Join(root, "outside")
	socketFile(t, filepath.Join(plugins, "a.sock"))
	socketFile(t, filepath.Join(plugins, "sub", "b.sock"))
	socketFile(t, filepath.Join(outside, "c.sock"))
	log, buf := testLog(t)
	s := mustNew(t, log, plugins)
	open := s.open
	s.open = func(p string, raw bool) (dir, error) {
		d, err := open(p, raw)
		return swapDir{d}, err
	}
	if d := cmp.Diff(join(plugins, "a.sock"), paths(mustScan(t, s))); d != "" {
		t.Errorf("Scan() paths (-want +got):\n%s", d)
	}
	if buf.Len() != 0 {
		t.Errorf("Scan() logged:\n%s\nwant nothing", buf)
	}
}

// swapDir replaces each subdirectory with a symlink to ../outside just
// before opening it.
type swapDir struct{ dir }

func (d swapDir) sub(name, path string) (dir, error) {
	if err := os.Rename(path, path+".moved"); err != nil {
		return nil, err
	}
	if err := os.Symlink(filepath.Join(filepath.Dir(path), "..", "outside"), path); err != nil {
		return nil, err
	}
	return d.dir.sub(name, path)
}

// TestScanSeesCtimeOnlyChange binds a socket in a scanned subdirectory and
// sets the subdirectory's mtime back to what it was, as `touch -d` would
// after the bind: only its ctime, which no chmod or utimes can set back,
// tells that it changed. The next Scan must report the socket, both when
// nothing else changed (the idle scan's stat of every directory) and when
// another directory changed too (the walk that reads the changed ones).
func TestScanSeesCtimeOnlyChange(t *testing.T) {
	t.Parallel()
	needUnixSockets(t)
	for _, alsoRoot := range []bool{false, true} {
		name := "only the subdirectory changed"
		if alsoRoot {
			name = "the root changed too"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := tempDir(t)
			sub := filepath.Join(dir, "sub")
			socketFile(t, filepath.Join(sub, "a.sock"))
			age(t, dir) // no directory is racy
			s := mustNew(t, nil, dir)
			prev := mustScan(t, s)
			before := dirStat(t, sub)
			added := []string{filepath.Join(sub, "b.sock")}
			socketFile(t, added[0])
			if alsoRoot {
				added = append([]string{filepath.Join(dir, "c.sock")}, added...) // sorted by path
				socketFile(t, added[0])
			}
			restoreMtime(t, sub, before)
			got := mustScan(t, s)
			if d := cmp.Diff(added, paths(Snapshot{Entries: Diff(prev, got).Added})); d != "" {
				t.Errorf("Diff() added (-want +got):\n%s", d)
			}
			if d := cmp.Diff(mustScan(t, mustNew(t, nil, dir)), got); d != "" {
				t.Errorf("Scan() differs from a full scan (-full +incremental):\n%s", d)
			}
		})
	}
}

// dirStat returns the ID of the directory path.
func dirStat(t *testing.T, path string) ID {
	t.Helper()
	id, err := statPathSys(path+"\x00", false)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// restoreMtime sets the mtime of the directory path back to was's, and
// checks that its identity and mtime are was's again and its ctime is
// not. Each utimes sets the ctime to the file system's clock, so it is
// repeated (within a few clock steps) until that clock has moved past
// was's ctime.
func restoreMtime(t *testing.T, path string, was ID) {
	t.Helper()
	for range 1_000_000 {
		if err := os.Chtimes(path, time.Time{}, time.Unix(0, was.Mtime)); err != nil {
			t.Fatal(err)
		}
		now := dirStat(t, path)
		if now.Ctime == was.Ctime {
			continue
		}
		if now.Dev != was.Dev || now.Ino != was.Ino || now.Mtime != was.Mtime || now.Birth != was.Birth {
			t.Fatalf("%s after setting its mtime back: %+v, want %+v but for ctime", path, now, was)
		}
		return
	}
	t.Fatalf("%s: ctime still %d after a million utimes", path, was.Ctime)
}
