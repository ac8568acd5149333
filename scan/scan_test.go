package scan

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

func TestScan(t *testing.T) {
	t.Parallel()
	needUnixSockets(t)
	root := tempDir(t)
	for _, p := range join(root,
		"a.sock", "a-b.sock", "sub/b.sock", "sub/deeper/c.sock",
		".hidden.sock", ".dot/d.sock", "sub/.dot/e.sock", "sub/.f.sock", "sub/.dot/deeper/g.sock",
	) {
		socketFile(t, p)
	}
	for _, p := range join(root, "file", "sub/file.sock", "empty/.keep") {
		writeFile(t, p)
	}
	s := mustNew(t, nil, root)
	got := mustScan(t, s)
	want := join(root, "a-b.sock", "a.sock", "sub/b.sock", "sub/deeper/c.sock")
	if d := cmp.Diff(want, paths(got)); d != "" {
		t.Errorf("Scan() paths (-want +got):\n%s", d)
	}
	ids := make(map[ID]string)
	for _, e := range got.Entries {
		if e.ID.Ino == 0 || e.ID.Mtime == 0 {
			t.Errorf("Scan() entry %s has ID %+v, want Ino and Mtime set", e.Path, e.ID)
		}
		if other, ok := ids[e.ID]; ok {
			t.Errorf("Scan() entries %s and %s have the same ID %+v", other, e.Path, e.ID)
		}
		ids[e.ID] = e.Path
	}
	if d := cmp.Diff(got, mustScan(t, s)); d != "" {
		t.Errorf("second Scan() differs (-first +second):\n%s", d)
	}
}

func TestNewCreatesMissingDir(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(tempDir(t), "a", "b")
	s := mustNew(t, nil, dir)
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatalf("New(%q) did not create it: %v", dir, err)
	}
	if !fi.IsDir() {
		t.Fatalf("New(%q) made a %v, want a directory", dir, fi.Mode())
	}
	if got := mustScan(t, s); len(got.Entries) != 0 {
		t.Errorf("Scan() of an empty dir = %v, want none", got)
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	if _, err := New(nil, nil); err == nil {
		t.Errorf("New(nil) error = nil, want one")
	}
	root := tempDir(t)
	file := filepath.Join(root, "file")
	writeFile(t, file)
	for _, dir := range []string{file, filepath.Join(file, "sub")} {
		_, err := New([]string{root, dir}, nil)
		if err == nil || !strings.Contains(err.Error(), dir) {
			t.Errorf("New(%q) error = %v, want one naming the dir", dir, err)
		}
	}
}

func TestDirs(t *testing.T) {
	t.Parallel()
	root := tempDir(t)
	other := filepath.Join(root, "other")
	s := mustNew(t, nil,
		root,
		root+string(filepath.Separator)+"."+string(filepath.Separator),
		filepath.Join(other, "..", "other"),
		filepath.ToSlash(other),
	)
	want := []string{root, other}
	if d := cmp.Diff(want, s.Dirs()); d != "" {
		t.Errorf("Dirs() (-want +got):\n%s", d)
	}
	s.Dirs()[0] = "changed"
	if got := s.Dirs()[0]; got != root {
		t.Errorf("Dirs()[0] = %q after changing a returned slice, want %q", got, root)
	}
}

func TestNewRelativeDir(t *testing.T) {
	root := tempDir(t)
	t.Chdir(root)
	s := mustNew(t, nil, "plugins", "./plugins/../plugins")
	if d := cmp.Diff([]string{filepath.Join(root, "plugins")}, s.Dirs()); d != "" {
		t.Errorf("Dirs() (-want +got):\n%s", d)
	}
}

// TestNewSymlinkDir checks that a plugin dir that is a symlink is resolved
// once, by New, and scanned at its target.
func TestNewSymlinkDir(t *testing.T) {
	t.Parallel()
	root := tempDir(t)
	target := filepath.Join(root, "target")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("cannot create a symlink: %v", err)
	}
	if r, err := filepath.EvalSymlinks(link); r != target {
		// wine creates symlinks that it then cannot find.
		t.Skipf("filepath.EvalSymlinks does not resolve symlinks here: %q, %v", r, err)
	}
	s := mustNew(t, nil, link)
	if d := cmp.Diff([]string{target}, s.Dirs()); d != "" {
		t.Errorf("Dirs() (-want +got):\n%s", d)
	}

	needUnixSockets(t)
	socketFile(t, filepath.Join(target, "a.sock"))
	if d := cmp.Diff(join(target, "a.sock"), paths(mustScan(t, s))); d != "" {
		t.Errorf("Scan() paths (-want +got):\n%s", d)
	}
}

func TestScanDirRemovedAndRecreated(t *testing.T) {
	t.Parallel()
	needUnixSockets(t)
	root := tempDir(t)
	dir := filepath.Join(root, "plugins")
	other := filepath.Join(root, "other")
	socketFile(t, filepath.Join(dir, "sub", "a.sock"))
	socketFile(t, filepath.Join(other, "b.sock"))
	log, buf := testLog(t)
	s := mustNew(t, log, dir, other)
	if d := cmp.Diff(join(root, "other/b.sock", "plugins/sub/a.sock"), paths(mustScan(t, s))); d != "" {
		t.Fatalf("Scan() paths (-want +got):\n%s", d)
	}

	if err := os.RemoveAll(dir); err != nil {
		t.Skipf("cannot remove the dir: %v", err)
	}
	if d := cmp.Diff(join(root, "other/b.sock"), paths(mustScan(t, s))); d != "" {
		t.Errorf("Scan() paths with the dir gone (-want +got):\n%s", d)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Scan() recreated the dir; Lstat error = %v", err)
	}

	socketFile(t, filepath.Join(dir, "sub", "a.sock"))
	if d := cmp.Diff(join(root, "other/b.sock", "plugins/sub/a.sock"), paths(mustScan(t, s))); d != "" {
		t.Errorf("Scan() paths with the dir back (-want +got):\n%s", d)
	}
	wantLogged(t, buf, map[string]int{"plugin directory missing": 1, "plugin directory present again": 1})
}

// TestScanRootMissingLogged removes a plugin dir and makes it again, more
// than once, and checks that each time it is logged missing once, however
// many scans find it missing, and present again once.
func TestScanRootMissingLogged(t *testing.T) {
	t.Parallel()
	const missing, back = "plugin directory missing", "plugin directory present again"
	for _, tc := range []struct {
		name    string
		existed bool // the dir exists when the Scanner is made
	}{
		{name: "removed", existed: true},
		// New makes a missing dir, so only newScanner can meet one.
		{name: "never existed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(tempDir(t), "plugins")
			if tc.existed {
				writeFile(t, filepath.Join(dir, "file"))
			}
			log, buf := testLog(t)
			s := newScanner([]string{dir}, log, (&osFS{}).openRoot)
			remove := func() {
				if err := os.RemoveAll(dir); err != nil {
					t.Skipf("cannot remove the dir: %v", err) // wine
				}
			}
			mkdir := func() {
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			steps := []struct {
				name   string
				change func()
				logs   map[string]int // the log lines of this step
			}{
				{name: "first scan", logs: map[string]int{missing: btoi(!tc.existed)}},
				{name: "removed", change: remove, logs: map[string]int{missing: btoi(tc.existed)}},
				{name: "still missing"},
				{name: "back", change: mkdir, logs: map[string]int{back: 1}},
				{name: "still there"},
				{name: "removed again", change: remove, logs: map[string]int{missing: 1}},
				{name: "still missing again"},
				{name: "back again", change: mkdir, logs: map[string]int{back: 1}},
			}
			logged := map[string]int{}
			for _, st := range steps {
				if st.change != nil {
					st.change()
				}
				if _, err := s.Scan(); err != nil {
					t.Fatalf("%s: Scan() error = %v", st.name, err)
				}
				for msg, n := range st.logs {
					logged[msg] += n
				}
				wantLogged(t, buf, logged)
				if t.Failed() {
					t.Fatalf("%s: log differs", st.name)
				}
			}
			for _, want := range []string{"level=WARN " + `msg="` + missing + `" path=` + dir, "level=INFO " + `msg="` + back + `" path=` + dir} {
				if !strings.Contains(buf.String(), want) {
					t.Errorf("log = %s, want a line %s", buf, want)
				}
			}
		})
	}
}

// btoi is 1 if b, else 0.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestScanPathTooLong(t *testing.T) {
	t.Parallel()
	needUnixSockets(t)
	root := tempDir(t)
	// long is a directory whose sockets' paths are just too long.
	long := root
	for len(filepath.Join(long, "x.sock")) <= MaxSocketPath {
		long = filepath.Join(long, strings.Repeat("d", min(60, MaxSocketPath+1-len(filepath.Join(long, "x.sock")))))
	}
	if err := os.MkdirAll(long, 0o755); err != nil {
		t.Fatal(err)
	}
	tooLong := filepath.Join(long, "x.sock")
	// A socket cannot be bound at a path that long, but it can be renamed there.
	socketFile(t, filepath.Join(root, "x.sock"))
	if err := os.Rename(filepath.Join(root, "x.sock"), tooLong); err != nil {
		t.Fatal(err)
	}
	// A socket at exactly the limit is fine.
	name := strings.Repeat("m", MaxSocketPath-len(root)-1)
	fits := filepath.Join(root, name)
	if len(fits) != MaxSocketPath {
		t.Fatalf("test bug: %d-byte path, want %d", len(fits), MaxSocketPath)
	}
	socketFile(t, fits)

	log, buf := testLog(t)
	s := mustNew(t, log, root)
	for range 3 {
		if d := cmp.Diff([]string{fits}, paths(mustScan(t, s))); d != "" {
			t.Fatalf("Scan() paths (-want +got):\n%s", d)
		}
	}
	if n := count(buf, "socket path too long"); n != 1 {
		t.Errorf("logged %q %d times in 3 scans, want once:\n%s", "socket path too long", n, buf)
	}
	want := (&PathTooLongError{Path: tooLong, Len: len(tooLong), Limit: MaxSocketPath}).Error()
	if !strings.Contains(buf.String(), want) || !strings.Contains(buf.String(), "path="+tooLong) {
		t.Errorf("log = %s, want the path and %q", buf, want)
	}

	// Gone and back: logged again.
	if err := os.Rename(tooLong, filepath.Join(root, "y.sock")); err != nil {
		t.Fatal(err)
	}
	mustScan(t, s)
	if err := os.Rename(filepath.Join(root, "y.sock"), tooLong); err != nil {
		t.Fatal(err)
	}
	mustScan(t, s)
	if n := count(buf, "socket path too long"); n != 2 {
		t.Errorf("logged %q %d times, want twice after the socket came back:\n%s", "socket path too long", n, buf)
	}
}

func TestPathTooLongError(t *testing.T) {
	err := &PathTooLongError{Path: "/x", Len: 130, Limit: 107}
	want := "socket path is 130 bytes, longer than the 107-byte limit of this OS (sun_path)"
	if got := err.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got := len(syscall.RawSockaddrUnix{}.Path) - 1; MaxSocketPath != got {
		t.Errorf("MaxSocketPath = %d, want %d", MaxSocketPath, got)
	}
}

// faults wraps the directories of a Scanner to inject errors and count
// reads.
type faults struct {
	open  map[string]error // directory path → error of opening it
	read  map[string]error // directory path → error of entries
	stat  map[string]error // socket or directory path → error of id or statDir
	reads map[string]int   // directory path → calls of entries
}

func (f *faults) wrap(s *Scanner) {
	if f.reads == nil {
		f.reads = make(map[string]int)
	}
	open := s.open
	s.open = func(p string, raw bool) (dir, error) {
		if err := f.open[p]; err != nil {
			return nil, err
		}
		d, err := open(p, raw)
		if err != nil {
			return nil, err
		}
		return faultDir{d, p, f}, nil
	}
	if statPath := s.statPath; statPath != nil {
		s.statPath = func(zpath string, follow, raw bool) (ID, error) {
			if err := f.stat[zpath[:len(zpath)-1]]; err != nil {
				return ID{}, err
			}
			return statPath(zpath, follow, raw)
		}
	}
}

type faultDir struct {
	dir
	path string
	f    *faults
}

func (d faultDir) entries() ([]fs.DirEntry, error) {
	d.f.reads[d.path]++
	if err := d.f.read[d.path]; err != nil {
		return nil, err
	}
	return d.dir.entries()
}

func (d faultDir) id(name, path string) (ID, error) {
	if err := d.f.stat[path]; err != nil {
		return ID{}, err
	}
	return d.dir.id(name, path)
}

func (d faultDir) statDir(name, path string) (ID, error) {
	if err := d.f.stat[path]; err != nil {
		return ID{}, err
	}
	return d.dir.statDir(name, path)
}

func (d faultDir) sub(name, path string) (dir, error) {
	if err := d.f.open[path]; err != nil {
		return nil, err
	}
	sub, err := d.dir.sub(name, path)
	if err != nil {
		return nil, err
	}
	return faultDir{sub, path, d.f}, nil
}

func TestScanUnreadableSubdir(t *testing.T) {
	t.Parallel()
	needUnixSockets(t)
	root := tempDir(t)
	for _, p := range join(root, "a.sock", "bad/b.sock", "bad/deeper/c.sock", "ok/d.sock") {
		socketFile(t, p)
	}
	bad := filepath.Join(root, "bad")
	log, buf := testLog(t)
	s := mustNew(t, log, root)
	// The injected faults leave the directories as they are: read them in
	// every scan, as a full scan does.
	s.FullScanEvery = 1
	f := &faults{read: map[string]error{bad: syscall.EACCES}}
	f.wrap(s)

	for range 3 {
		if d := cmp.Diff(join(root, "a.sock", "ok/d.sock"), paths(mustScan(t, s))); d != "" {
			t.Fatalf("Scan() paths with bad/ unreadable (-want +got):\n%s", d)
		}
	}
	if n := count(buf, "cannot read directory"); n != 1 {
		t.Errorf("logged %q %d times in 3 scans, want once:\n%s", "cannot read directory", n, buf)
	}
	if want := "path=" + bad; !strings.Contains(buf.String(), want) {
		t.Errorf("log = %s, want %s", buf, want)
	}

	all := join(root, "a.sock", "bad/b.sock", "bad/deeper/c.sock", "ok/d.sock")
	delete(f.read, bad)
	if d := cmp.Diff(all, paths(mustScan(t, s))); d != "" {
		t.Fatalf("Scan() paths with bad/ readable again (-want +got):\n%s", d)
	}
	if n := count(buf, "directory readable again"); n != 1 {
		t.Errorf("logged %q %d times, want once:\n%s", "directory readable again", n, buf)
	}

	// Unreadable after a read: its entries are kept.
	f.read[bad] = syscall.EIO
	for range 2 {
		if d := cmp.Diff(all, paths(mustScan(t, s))); d != "" {
			t.Fatalf("Scan() paths with bad/ unreadable after a read (-want +got):\n%s", d)
		}
	}
	if n := count(buf, "cannot read directory"); n != 2 {
		t.Errorf("logged %q %d times, want twice after failing again:\n%s", "cannot read directory", n, buf)
	}
}

func TestScanStatError(t *testing.T) {
	t.Parallel()
	needUnixSockets(t)
	root := tempDir(t)
	for _, p := range join(root, "a.sock", "b.sock", "gone.sock") {
		socketFile(t, p)
	}
	log, buf := testLog(t)
	s := mustNew(t, log, root)
	b := filepath.Join(root, "b.sock")
	f := &faults{stat: map[string]error{
		b: syscall.EIO,
		// Removed between the directory read and the stat: no error.
		filepath.Join(root, "gone.sock"): syscall.ENOENT,
	}}
	f.wrap(s)
	for range 3 {
		if d := cmp.Diff(join(root, "a.sock"), paths(mustScan(t, s))); d != "" {
			t.Fatalf("Scan() paths (-want +got):\n%s", d)
		}
	}
	if n := count(buf, "cannot stat socket"); n != 1 || !strings.Contains(buf.String(), "path="+b) {
		t.Errorf("logged %q %d times in 3 scans, want once for %s:\n%s", "cannot stat socket", n, b, buf)
	}
}

// TestScanSocketVanishes removes a socket between the directory read and
// its stat.
func TestScanSocketVanishes(t *testing.T) {
	t.Parallel()
	needUnixSockets(t)
	root := tempDir(t)
	for _, p := range join(root, "a.sock", "b.sock") {
		socketFile(t, p)
	}
	log, buf := testLog(t)
	s := mustNew(t, log, root)
	open := s.open
	s.open = func(p string, raw bool) (dir, error) {
		d, err := open(p, raw)
		return vanishDir{d}, err
	}
	if d := cmp.Diff(join(root, "a.sock"), paths(mustScan(t, s))); d != "" {
		t.Fatalf("Scan() paths (-want +got):\n%s", d)
	}
	if buf.Len() != 0 {
		t.Errorf("Scan() logged:\n%s\nwant nothing", buf)
	}
}

// vanishDir removes b.sock just before it is stat'ed.
type vanishDir struct{ dir }

func (d vanishDir) id(name, path string) (ID, error) {
	if name == "b.sock" {
		if err := os.Remove(path); err != nil {
			return ID{}, err
		}
	}
	return d.dir.id(name, path)
}

func TestScanRootUnreadable(t *testing.T) {
	t.Parallel()
	needUnixSockets(t)
	root := tempDir(t)
	bad, good := filepath.Join(root, "bad"), filepath.Join(root, "good")
	socketFile(t, filepath.Join(bad, "a.sock"))
	socketFile(t, filepath.Join(good, "b.sock"))
	log, buf := testLog(t)
	s := mustNew(t, log, bad, good)
	(&faults{read: map[string]error{bad: syscall.EACCES}}).wrap(s)

	got, err := s.Scan()
	if pe, ok := errors.AsType[*fs.PathError](err); !ok || pe.Path != bad || !errors.Is(err, syscall.EACCES) {
		t.Errorf("Scan() error = %v, want an *fs.PathError for %s wrapping EACCES", err, bad)
	}
	if d := cmp.Diff(join(good, "b.sock"), paths(got)); d != "" {
		t.Errorf("Scan() paths (-want +got):\n%s", d)
	}
	if buf.Len() != 0 {
		t.Errorf("Scan() logged:\n%s\nwant nothing: the error is returned", buf)
	}
}

// TestScanRootNotDir replaces a plugin dir with a regular file.
func TestScanRootNotDir(t *testing.T) {
	t.Parallel()
	root := tempDir(t)
	dir := filepath.Join(root, "plugins")
	s := mustNew(t, nil, dir, root)
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir)
	_, err := s.Scan()
	if pe, ok := errors.AsType[*fs.PathError](err); !ok || pe.Path != dir {
		t.Errorf("Scan() error = %v, want an *fs.PathError for %s", err, dir)
	}
}

// mapDir is a fake directory tree: an fstest.MapFS whose directories and
// socket files carry their ID in Sys. A directory without an entry of its own
// (implied by the files in it) has the zero ID.
type mapDir struct {
	fsys fstest.MapFS
	rel  string // slash-separated path in fsys
}

// mapOpen opens the directory at the absolute path p in fsys as a dir:
// "/plugins" (`\plugins` on Windows) is "plugins" in fsys.
func mapOpen(fsys fstest.MapFS) func(p string, raw bool) (dir, error) {
	return func(p string, raw bool) (dir, error) {
		d := mapDir{fsys, strings.TrimPrefix(filepath.ToSlash(p), "/")}
		if _, err := d.statDir(".", p); err != nil {
			return nil, err
		}
		return d, nil
	}
}

func (d mapDir) stat() (ID, error) { return d.statDir(".", "") }

func (d mapDir) statDir(name, _ string) (ID, error) {
	fi, err := fs.Stat(d.fsys, path.Join(d.rel, name))
	switch {
	case err != nil:
		return ID{}, err
	case !fi.IsDir():
		return ID{}, syscall.ENOTDIR
	}
	id, _ := fi.Sys().(ID)
	return id, nil
}

func (d mapDir) entries() ([]fs.DirEntry, error) { return fs.ReadDir(d.fsys, d.rel) }

func (d mapDir) isSocket(e fs.DirEntry) bool { return e.Type()&fs.ModeSocket != 0 }

func (d mapDir) id(name, _ string) (ID, error) {
	f, ok := d.fsys[path.Join(d.rel, name)]
	if !ok || f.Mode&fs.ModeSocket == 0 {
		return ID{}, fs.ErrNotExist
	}
	return f.Sys.(ID), nil
}

func (d mapDir) sub(name, p string) (dir, error) {
	if _, err := d.statDir(name, p); err != nil {
		return nil, err
	}
	return mapDir{d.fsys, path.Join(d.rel, name)}, nil
}

func (d mapDir) close() error { return nil }

// TestScanFakeTree runs the walk over an fstest.MapFS, which has every file
// type on every OS (wine included).
func TestScanFakeTree(t *testing.T) {
	t.Parallel()
	sock := func(n uint64) *fstest.MapFile { return &fstest.MapFile{Mode: fs.ModeSocket, Sys: ID{Ino: n}} }
	fsys := fstest.MapFS{
		"plugins/a.sock":             sock(1),
		"plugins/a-b.sock":           sock(2),
		"plugins/a/x.sock":           sock(3),
		"plugins/sub/b.sock":         sock(4),
		"plugins/sub/deep/er/c.sock": sock(5),
		"plugins/.d.sock":            sock(6),
		"plugins/.dot/e.sock":        sock(7),
		"plugins/sub/.dot/f.sock":    sock(8),
		"plugins/fifo":               {Mode: fs.ModeNamedPipe},
		"plugins/dev":                {Mode: fs.ModeDevice | fs.ModeCharDevice},
		"plugins/link.sock":          {Mode: fs.ModeSymlink, Data: []byte("a.sock")},
		"plugins/linkdir":            {Mode: fs.ModeSymlink, Data: []byte("sub")},
		"plugins/file.sock":          {Data: []byte("x")},
		"plugins/empty":              {Mode: fs.ModeDir},
	}
	root := filepath.FromSlash("/plugins")
	open := mapOpen(fsys)
	// The plugin dirs overlap: sub/ is scanned twice and reported once.
	s := newScanner([]string{filepath.Join(root, "sub"), root, filepath.Join(root, "missing")}, nil, open)
	got := mustScan(t, s)
	if again := mustScan(t, s); !got.Same(again) {
		t.Errorf("Scan() with nothing changed returned new entries, want the previous ones")
	}
	// Sorted by path, not in walk order (which is a/x.sock, a-b.sock, a.sock).
	want := Snapshot{Entries: []Entry{
		{Path: filepath.Join(root, "a-b.sock"), ID: ID{Ino: 2}},
		{Path: filepath.Join(root, "a.sock"), ID: ID{Ino: 1}},
		{Path: filepath.Join(root, "a", "x.sock"), ID: ID{Ino: 3}},
		{Path: filepath.Join(root, "sub", "b.sock"), ID: ID{Ino: 4}},
		{Path: filepath.Join(root, "sub", "deep", "er", "c.sock"), ID: ID{Ino: 5}},
	}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Scan() (-want +got):\n%s", d)
	}
}

// TestScanOpensRootOnlyToRead checks on a real plugin dir that an idle scan
// stats each directory by path and opens none, whether
// the dir is flat or has subdirectories, and that the root is opened when
// it must be read.
func TestScanOpensRootOnlyToRead(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, root string)
		want  []int // opens of the root by each of three scans
		// without statPath (Windows), where the root is opened to reach
		// its subdirectories
		wantOpening []int
	}{
		{"flat", func(*testing.T, string) {}, []int{1, 0, 0}, []int{1, 0, 0}},
		{"with a subdirectory", func(t *testing.T, root string) {
			if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, []int{1, 0, 0}, []int{1, 1, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := filepath.Join(tempDir(t), "plugins")
			if err := os.Mkdir(root, 0o755); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, root)
			age(t, root) // not racy: an unchanged dir need not be read again
			s, err := New([]string{root}, nil)
			if err != nil {
				t.Fatal(err)
			}
			opens := 0
			open := s.open
			s.open = func(path string, raw bool) (dir, error) {
				opens++
				return open(path, raw)
			}
			var got []int
			for range tc.want {
				opens = 0
				mustScan(t, s)
				got = append(got, opens)
			}
			want := tc.want
			if s.statPath == nil {
				want = tc.wantOpening
			}
			if !slices.Equal(got, want) {
				t.Errorf("opens of the root by each scan = %v, want %v", got, want)
			}
			// A change is still seen: the dir's stat changed, so it is read.
			if err := os.WriteFile(filepath.Join(root, "new"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			age(t, root)
			opens = 0
			mustScan(t, s)
			if opens != 1 {
				t.Errorf("opens of the root after a change = %d, want 1", opens)
			}
		})
	}
}
