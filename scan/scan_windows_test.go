package scan

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestEntryIDReplacedFile checks identity on regular files, which work
// where AF_UNIX does not (wine): the ID is stable for one file and changes
// when the file is replaced at the same path.
func TestEntryIDReplacedFile(t *testing.T) {
	t.Parallel()
	p := filepath.Join(tempDir(t), "a")
	writeFile(t, p)
	first, err := entryID(p)
	if err != nil {
		t.Fatalf("entryID(%q) error = %v", p, err)
	}
	if again, err := entryID(p); err != nil || again != first {
		t.Errorf("entryID(%q) = %+v, %v the second time, want %+v", p, again, err, first)
	}
	if first.Birth == 0 || first.Mtime == 0 {
		t.Errorf("entryID(%q) = %+v, want Birth and Mtime set", p, first)
	}
	for i := range 10 {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		writeFile(t, p)
		id, err := entryID(p)
		if err != nil {
			t.Fatalf("round %d: entryID(%q) error = %v", i, p, err)
		}
		if id == first {
			t.Fatalf("round %d: replaced file has the same ID %+v", i, id)
		}
		first = id
	}
}

func TestEntryIDMissing(t *testing.T) {
	t.Parallel()
	p := filepath.Join(tempDir(t), "missing")
	if _, err := entryID(p); !gone(err) {
		t.Errorf("entryID(%q) error = %v, want one meaning gone", p, err)
	}
}

// TestIsSocketNotSocket checks that files and directories are not sockets,
// and that FindFirstFile reports no reparse tag for them.
func TestIsSocketNotSocket(t *testing.T) {
	t.Parallel()
	root := tempDir(t)
	writeFile(t, filepath.Join(root, "file.sock"))
	if err := os.Mkdir(filepath.Join(root, "dir.sock"), 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if isSocket(e, root) {
			t.Errorf("isSocket(%s) = true, want false", e.Name())
		}
		if tag := reparseTag(filepath.Join(root, e.Name())); tag != 0 {
			t.Errorf("reparseTag(%s) = %#x, want 0", e.Name(), tag)
		}
	}
}

// TestWindowsPaths checks that plugin dirs get a volume name and backslashes
// however they are written.
func TestWindowsPaths(t *testing.T) {
	t.Parallel()
	root := tempDir(t)
	if filepath.VolumeName(root) == "" {
		t.Fatalf("tempDir() = %q, want a volume name", root)
	}
	dir := filepath.Join(root, "plugins")
	s := mustNew(t, nil, filepath.ToSlash(dir)+"/", dir)
	if d := cmp.Diff([]string{dir}, s.Dirs()); d != "" {
		t.Errorf("Dirs() (-want +got):\n%s", d)
	}
	writeFile(t, filepath.Join(dir, "sub", "file"))
	writeFile(t, filepath.Join(dir, ".dot", "file"))
	if got := mustScan(t, s); len(got.Entries) != 0 {
		t.Errorf("Scan() = %v, want no sockets", got)
	}
}
