package scan

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestStatPathLinux: the raw stat, and the one made the usual way, give
// what unix.Fstatat gives (statPathSys), for a directory, a symlink to one
// (followed or not), a file and a missing path.
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
		usual, usualErr := statPathLinux(zpath, tc.follow, false)
		sys, sysErr := statPathSys(zpath, tc.follow)
		if (rawErr != nil) != tc.wantErr || (rawErr != nil && !gone(rawErr)) {
			t.Errorf("%s (follow %v): raw stat error %v, want an error satisfying gone: %v", tc.name, tc.follow, rawErr, tc.wantErr)
		}
		if rawErr != sysErr || raw != sys || usualErr != sysErr || usual != sys {
			t.Errorf("%s (follow %v): raw stat = %v, %v; usual stat = %v, %v; unix.Fstatat = %v, %v", tc.name, tc.follow, raw, rawErr, usual, usualErr, sys, sysErr)
		}
		if !tc.wantErr && raw.Ino == 0 {
			t.Errorf("%s: raw stat gave no inode", tc.name)
		}
	}
}

// TestMountGateLinux: the real gate finds a test's temporary directory
// settled (tmpfs, ext4, overlayfs and the like) and /proc not; as root, it
// is told of a tmpfs mounted below a plugin dir, which leaves the dir
// settled. The table's lines are parsed as the kernel
// writes them, escapes and all.
func TestMountGateLinux(t *testing.T) {
	dir := t.TempDir()
	g, err := openMountGate([]string{dir, "/proc"})
	if err != nil {
		t.Fatal(err)
	}
	if !g.rootSettled(0) {
		t.Skipf("the temporary directory is on a file system the gate does not know: %s", os.TempDir())
	}
	if g.rootSettled(1) {
		t.Error("rootSettled(/proc) = true, want false")
	}
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("plugreg-test", sub, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(sub, unix.MNT_DETACH) })
	if !g.changed() {
		t.Error("no change of the mount table signalled after a mount")
	}
	g.verify()
	if !g.rootSettled(0) {
		t.Error("rootSettled with a tmpfs below = false, want true")
	}
	// The escapes of a mount point, and the type after the separator.
	ms := parseMountInfo([]byte("36 35 0:51 / " + sub + `\040x rw shared:1 - fuse plugreg rw` + "\n1 0 8:1 / / rw - ext4 /dev/sda1 rw\n"))
	if want := []mount{{sub + " x", "fuse"}, {"/", "ext4"}}; !slices.Equal(ms, want) {
		t.Errorf("parseMountInfo = %v, want %v", ms, want)
	}
}

// TestIdleUnsettledScanAllocs: an idle Scan of a tree below a plugin dir
// that is not settled allocates the goroutine that reads the dir and
// nothing else: its stats, made the usual way, and its wait for them
// allocate nothing (not parallel: AllocsPerRun counts the whole process).
func TestIdleUnsettledScanAllocs(t *testing.T) {
	dir := filepath.Join(tempDir(t), "plugins")
	for _, p := range join(dir, "a.sock", "sub/b.sock", "sub/deep/c.sock") {
		socketFile(t, p)
	}
	age(t, dir) // no directory is racy
	s := mustNew(t, nil, dir)
	s.settled = func(int) bool { return false }
	mustScan(t, s)
	if n := testing.AllocsPerRun(20, func() { mustScan(t, s) }); n > 1 {
		t.Errorf("an idle scan of a dir that is not settled allocates %v times, want 1 (its goroutine)", n)
	}
}
