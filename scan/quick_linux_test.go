package scan

import (
	"os"
	"path/filepath"
	"testing"
)

// TestStatPathLinux: the raw stat gives what the usual one gives, for a
// directory, a symlink to one (followed or not), a file and a missing path.
func TestStatPathLinux(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(sub, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "file"))
	tests := []struct {
		name    string
		follow  bool
		wantErr bool // and gone(err)
	}{
		{"sub", false, false},
		{"link", true, false},
		{"link", false, true},
		{"file", true, true},
		{"missing", true, true},
	}
	for _, tc := range tests {
		zpath := filepath.Join(dir, tc.name) + "\x00"
		raw, rawErr := statPathLinux(zpath, tc.follow, true)
		sys, sysErr := statPathLinux(zpath, tc.follow, false)
		if (rawErr != nil) != tc.wantErr || (rawErr != nil && !gone(rawErr)) {
			t.Errorf("%s (follow %v): raw stat error %v, want an error satisfying gone: %v", tc.name, tc.follow, rawErr, tc.wantErr)
		}
		if rawErr != sysErr || raw != sys {
			t.Errorf("%s (follow %v): raw stat = %v, %v; usual stat = %v, %v", tc.name, tc.follow, raw, rawErr, sys, sysErr)
		}
		if !tc.wantErr && raw.Ino == 0 {
			t.Errorf("%s: raw stat gave no inode", tc.name)
		}
	}
}

// TestLocalFS: a raw stat is used for a test's temporary directory (tmpfs,
// ext4, overlayfs and the like) and not for /proc, which is none of those.
func TestLocalFS(t *testing.T) {
	t.Parallel()
	if !LocalFS(t.TempDir()) {
		t.Skipf("the temporary directory is on a file system localFS does not know: %s", os.TempDir())
	}
	if LocalFS("/proc") {
		t.Error("LocalFS(/proc) = true, want false")
	}
	if LocalFS(filepath.Join(t.TempDir(), "missing")) {
		t.Error("localFS of a missing path = true, want false")
	}
}
