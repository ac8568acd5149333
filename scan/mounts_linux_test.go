package scan

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReadProcRaw: the raw read of a proc file gives what os.ReadFile
// gives: the mount table, however long (the buffer grows), a file longer
// than one read, and a missing file's fs.ErrNotExist.
func TestReadProcRaw(t *testing.T) {
	t.Parallel()
	got, err := readProcRaw(mountInfo)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(mountInfo)
	if err != nil {
		t.Fatal(err)
	}
	// The table may change between the two reads: compare what they say.
	if diff := cmp.Diff(parseMountInfo(want), parseMountInfo(got), cmp.AllowUnexported(mount{})); diff != "" {
		t.Logf("the mount table changed between the reads, or (-os.ReadFile +readProcRaw):\n%s", diff)
		if !strings.HasSuffix(string(got), "\n") {
			t.Errorf("readProcRaw(%s) = %q..., not whole lines", mountInfo, got[:min(len(got), 80)])
		}
	}
	long := filepath.Join(t.TempDir(), "long")
	content := strings.Repeat("0123456789abcdef", 3*procReadSize/16+5)
	if err := os.WriteFile(long, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := readProcRaw(long); err != nil || string(b) != content {
		t.Errorf("readProcRaw(a file of %d bytes) = %d bytes, %v", len(content), len(b), err)
	}
	if _, err := readProcRaw(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("readProcRaw(missing) = %v, want fs.ErrNotExist", err)
	}
}
