package scan

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRawDirMatchesOS: a directory read with raw system calls (rawDir, a
// full scan of a settled plugin dir) lists what package os lists, with the
// same types, whatever the directory holds and however many reads it
// takes; its sockets and subdirectories stat as osDir's do; and a Scanner
// reading the tree raw reports what one reading it the usual way reports.
func TestRawDirMatchesOS(t *testing.T) {
	t.Parallel()
	needUnixSockets(t)
	long := strings.Repeat("n", 200)
	tests := []struct {
		name  string
		build func(t *testing.T, dir string)
	}{
		{"empty", func(*testing.T, string) {}},
		{"every type", func(t *testing.T, dir string) {
			socketFile(t, filepath.Join(dir, "a.sock"))
			socketFile(t, filepath.Join(dir, ".hidden.sock"))
			writeFile(t, filepath.Join(dir, "file"))
			socketFile(t, filepath.Join(dir, "sub", "b.sock"))
			if err := os.Symlink("a.sock", filepath.Join(dir, "link.sock")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("sub", filepath.Join(dir, "link-dir")); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"many reads", func(t *testing.T, dir string) {
			// 300 entries of over 200 bytes: several reads of direntBuf.
			for i := range 300 {
				writeFile(t, filepath.Join(dir, fmt.Sprintf("%s-%03d", long, i)))
			}
			for i := range 20 {
				socketFile(t, filepath.Join(dir, fmt.Sprintf("s%02d.sock", i)))
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(tempDir(t), "plugins")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			tt.build(t, dir)
			d, err := openRootRaw(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer d.close()
			if _, ok := d.(*rawDir); !ok {
				t.Fatalf("openRootRaw(%s) = %T, want a *rawDir", dir, d)
			}
			want, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			got, err := d.entries()
			if err != nil {
				t.Fatalf("entries() = %v", err)
			}
			if diff := cmp.Diff(listing(t, dir, want), listing(t, dir, got)); diff != "" {
				t.Errorf("entries() (-os +raw):\n%s", diff)
			}
			od, err := (&osFS{}).openRoot(dir, false)
			if err != nil {
				t.Fatal(err)
			}
			defer od.close()
			for _, e := range want {
				path := filepath.Join(dir, e.Name())
				rid, rerr := d.id(e.Name(), path)
				oid, oerr := od.id(e.Name(), path)
				if rid != oid || (rerr == nil) != (oerr == nil) {
					t.Errorf("id(%s) = %v, %v; osDir's %v, %v", e.Name(), rid, rerr, oid, oerr)
				}
				rid, rerr = d.statDir(e.Name(), path)
				oid, oerr = od.statDir(e.Name(), path)
				if rid != oid || (rerr == nil) != (oerr == nil) {
					t.Errorf("statDir(%s) = %v, %v; osDir's %v, %v", e.Name(), rid, rerr, oid, oerr)
				}
			}

			raw, plain := mustNew(t, nil, dir), mustNew(t, nil, dir)
			raw.settled = func(int) bool { return true }
			plain.settled = func(int) bool { return false }
			if diff := cmp.Diff(mustScan(t, plain).Entries, mustScan(t, raw).Entries); diff != "" {
				t.Errorf("Scan() raw (-usual +raw):\n%s", diff)
			}
		})
	}
}

// listing is the entries of dir as name and type, sorted, with each
// entry's Info checked against its type.
func listing(t *testing.T, dir string, ents []fs.DirEntry) []string {
	t.Helper()
	var out []string
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Errorf("%s: Info() = %v", filepath.Join(dir, e.Name()), err)
		} else if fi.Mode().Type() != e.Type() {
			t.Errorf("%s: Info().Mode().Type() = %v, Type() = %v", filepath.Join(dir, e.Name()), fi.Mode().Type(), e.Type())
		}
		out = append(out, fmt.Sprintf("%s %v %v", e.Name(), e.Type(), e.IsDir()))
	}
	slices.Sort(out)
	return out
}

// TestReadAllocsPerSocket: reading a settled directory again (a full scan
// here; a read after a change is the same) allocates two objects per
// socket, its name and its entry, and nothing for its stat: during a burst
// of plugins the directory is read again at every scan. Not parallel:
// AllocsPerRun counts the whole process.
func TestReadAllocsPerSocket(t *testing.T) {
	const n = 200
	dir := filepath.Join(tempDir(t), "plugins")
	for i := range n {
		socketFile(t, filepath.Join(dir, fmt.Sprintf("s%03d.sock", i)))
	}
	age(t, dir)
	s := mustNew(t, nil, dir)
	if !s.Settled(filepath.Join(dir, "s000.sock")) {
		t.Skipf("%s is not settled (see Scanner.Settled): it is read the usual way", dir)
	}
	s.FullScanEvery = 1 // every scan reads every directory
	mustScan(t, s)
	if got := testing.AllocsPerRun(20, func() { mustScan(t, s) }); got > 2*n+20 {
		t.Errorf("a read of %d sockets allocates %v times, want at most %d: 2 per socket and a few", n, got, 2*n+20)
	}
}
