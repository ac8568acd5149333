package scan

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func TestScanIgnoresDevice(t *testing.T) {
	t.Parallel()
	dir := tempDir(t)
	socketFile(t, filepath.Join(dir, "a.sock"))
	if err := unix.Mknod(filepath.Join(dir, "null.sock"), unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err != nil {
		t.Skipf("cannot make a device node: %v", err)
	}
	if err := unix.Mknod(filepath.Join(dir, "blk.sock"), unix.S_IFBLK|0o600, int(unix.Mkdev(7, 0))); err != nil {
		t.Skipf("cannot make a device node: %v", err)
	}
	s := mustNew(t, nil, dir)
	if d := cmp.Diff(join(dir, "a.sock"), paths(mustScan(t, s))); d != "" {
		t.Errorf("Scan() paths (-want +got):\n%s", d)
	}
}

// unreadableEnv names the plugin dir for the child process of
// TestScanUnreadableSubdirReal.
const unreadableEnv = "PLUGREG_SCAN_UNREADABLE_DIR"

// TestScanUnreadableSubdirReal scans a plugin dir with a mode 0700
// subdirectory that the scanning user cannot read. Permission bits do not
// stop root, so when the test runs as root it re-runs itself as user 65534
// in a child process.
func TestScanUnreadableSubdirReal(t *testing.T) {
	if dir := os.Getenv(unreadableEnv); dir != "" {
		unreadableChild(dir)
		return
	}
	t.Parallel()
	root := tempDir(t)
	dir := filepath.Join(root, "plugins")
	locked := filepath.Join(dir, "locked")
	socketFile(t, filepath.Join(dir, "a.sock"))
	socketFile(t, filepath.Join(dir, "open", "b.sock"))
	socketFile(t, filepath.Join(locked, "c.sock"))
	if err := os.Chmod(locked, 0o700); err != nil {
		t.Fatal(err)
	}

	var out []byte
	if os.Geteuid() != 0 {
		if err := os.Chmod(locked, 0o000); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(locked, 0o700) })
		var buf bytes.Buffer
		scanThrice(&buf, dir)
		out = buf.Bytes()
	} else {
		out = runUnprivileged(t, root, "TestScanUnreadableSubdirReal", unreadableEnv+"="+dir)
	}

	entries, logs := splitChildOutput(out)
	want := join(dir, "a.sock", "open/b.sock")
	want = append(append(want, want...), want...) // three scans
	if d := cmp.Diff(want, entries); d != "" {
		t.Errorf("entries of three scans (-want +got):\n%s", d)
	}
	wantLog := []string{fmt.Sprintf(`level=WARN msg="cannot read directory" path=%s err="permission denied"`, locked)}
	if d := cmp.Diff(wantLog, logs); d != "" {
		t.Errorf("log of three scans (-want +got):\n%s", d)
	}
}

// runUnprivileged runs test as user and group 65534, with env (NAME=value)
// added to its environment, in a copy of the test binary that user can
// execute, and returns its output.
func runUnprivileged(t *testing.T, root, test, env string) []byte {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(root, "scan.test")
	if err := copyFile(exe, self); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), exe, "-test.run=^"+test+"$", "-test.count=1")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s%s", err, out, &stderr)
	}
	// Drop the lines of the child's test framework ("PASS", "coverage: ...").
	var keep []byte
	for line := range bytes.Lines(out) {
		if bytes.HasPrefix(line, []byte("entry ")) || bytes.HasPrefix(line, []byte("level=")) {
			keep = append(keep, line...)
		}
	}
	return keep
}

// unreadableChild is the child process of TestScanUnreadableSubdirReal.
func unreadableChild(dir string) {
	if err := scanThrice(os.Stdout, dir); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
}

// scanThrice scans dir three times, writing each entry as "entry <path>"
// and the log as text without times.
func scanThrice(w io.Writer, dir string) error {
	s, err := New([]string{dir}, textLog(w))
	if err != nil {
		return err
	}
	for range 3 {
		snap, err := s.Scan()
		if err != nil {
			return err
		}
		for _, e := range snap.Entries {
			fmt.Fprintf(w, "entry %s\n", e.Path)
		}
	}
	return nil
}

// textLog returns a logger that writes text without times to w.
func textLog(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

// keepEnv names the plugin dir for the child process of
// TestScanUnreadableKeepsEntriesReal.
const keepEnv = "PLUGREG_SCAN_KEEP_DIR"

// TestScanUnreadableKeepsEntriesReal scans a plugin dir whose readable
// subdirectory locked/ is made mode 000, so that the scanning user can no
// longer read it, and then 0700 again. As root, the test chowns the tree and
// re-runs itself as user 65534 in a child process.
func TestScanUnreadableKeepsEntriesReal(t *testing.T) {
	if dir := os.Getenv(keepEnv); dir != "" {
		if err := lockScans(os.Stdout, dir); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		return
	}
	t.Parallel()
	root := tempDir(t)
	dir := filepath.Join(root, "plugins")
	locked := filepath.Join(dir, "locked")
	for _, p := range join(dir, "a.sock", "locked/b.sock", "locked/deeper/c.sock") {
		socketFile(t, p)
	}
	t.Cleanup(func() { os.Chmod(locked, 0o700) })

	var out []byte
	if os.Geteuid() != 0 {
		var buf bytes.Buffer
		if err := lockScans(&buf, dir); err != nil {
			t.Fatal(err)
		}
		out = buf.Bytes()
	} else {
		err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, 65534, 65534)
		})
		if err != nil {
			t.Fatal(err)
		}
		out = runUnprivileged(t, root, "TestScanUnreadableKeepsEntriesReal", keepEnv+"="+dir)
	}

	entries, logs := splitChildOutput(out)
	var want []string
	for _, scan := range []string{"readable", "locked", "locked", "unlocked, b.sock removed"} {
		rel := []string{"a.sock", "locked/b.sock", "locked/deeper/c.sock"}
		if scan == "unlocked, b.sock removed" {
			rel = []string{"a.sock", "locked/deeper/c.sock"}
		}
		for _, p := range join(dir, rel...) {
			want = append(want, scan+": "+p)
		}
	}
	if d := cmp.Diff(want, entries); d != "" {
		t.Errorf("entries of four scans (-want +got):\n%s", d)
	}
	wantLog := []string{
		fmt.Sprintf(`level=WARN msg="cannot read directory" path=%s err="permission denied"`, locked),
		fmt.Sprintf(`level=INFO msg="directory readable again" path=%s`, locked),
	}
	if d := cmp.Diff(wantLog, logs); d != "" {
		t.Errorf("log of four scans (-want +got):\n%s", d)
	}
}

// lockScans scans dir, makes dir/locked mode 000 and scans twice, makes it
// 0700 again, removes locked/b.sock and scans once more. It writes each
// entry as "entry <scan>: <path>" and the log as text without times.
func lockScans(w io.Writer, dir string) error {
	s, err := New([]string{dir}, textLog(w))
	if err != nil {
		return err
	}
	locked := filepath.Join(dir, "locked")
	scan := func(name string) error {
		snap, err := s.Scan()
		for _, e := range snap.Entries {
			fmt.Fprintf(w, "entry %s: %s\n", name, e.Path)
		}
		return err
	}
	steps := []struct {
		name   string
		change func() error
	}{
		{"readable", nil},
		{"locked", func() error { return os.Chmod(locked, 0) }},
		{"locked", nil},
		{"unlocked, b.sock removed", func() error {
			if err := os.Chmod(locked, 0o700); err != nil {
				return err
			}
			return os.Remove(filepath.Join(locked, "b.sock"))
		}},
	}
	for _, st := range steps {
		if st.change != nil {
			if err := st.change(); err != nil {
				return err
			}
		}
		if err := scan(st.name); err != nil {
			return err
		}
	}
	return nil
}

// copyFile copies the executable src to dst, holding syscall.ForkLock
// while dst is open for writing: a process forked meanwhile by a parallel
// test would keep it open until it execs, and running dst would then fail
// with ETXTBSY (text file busy).
func copyFile(dst, src string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	syscall.ForkLock.Lock()
	defer syscall.ForkLock.Unlock()
	return os.WriteFile(dst, b, 0o755)
}

// splitChildOutput splits what scanThrice printed into the "entry PATH"
// lines (the paths) and the rest (log lines).
func splitChildOutput(out []byte) (entries, logs []string) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "entry "); ok {
			entries = append(entries, p)
		} else {
			logs = append(logs, sc.Text())
		}
	}
	return entries, logs
}

// TestScanIgnoresNamesNotUTF8 runs on Linux, where any bytes make a file
// name; macOS refuses names that are not valid UTF-8.
func TestScanIgnoresNamesNotUTF8(t *testing.T) {
	t.Parallel()
	needUnixSockets(t)
	root := tempDir(t)
	good := filepath.Join(root, "good.sock")
	bad := filepath.Join(root, "bad-\xff.sock")
	badDir := filepath.Join(root, "\xfe\xfd", "x.sock")
	for _, p := range []string{good, bad, badDir} {
		socketFile(t, p)
	}
	log, buf := testLog(t)
	s := mustNew(t, log, root)
	for range 3 {
		if d := cmp.Diff([]string{good}, paths(mustScan(t, s))); d != "" {
			t.Fatalf("Scan() paths (-want +got):\n%s", d)
		}
	}
	const msg = "socket ignored: path is not valid UTF-8"
	if n := count(buf, msg); n != 2 {
		t.Errorf("logged %q %d times in 3 scans of 2 bad sockets, want twice:\n%s", msg, n, buf)
	}
	if q := strconv.Quote(bad); !strings.Contains(buf.String(), q[1:len(q)-1]) {
		t.Errorf("log = %s, want the path escaped as in %s", buf, q)
	}
	if !utf8.Valid(buf.Bytes()) {
		t.Errorf("log is not valid UTF-8: %q", buf)
	}
	if got := s.Ignored()["name"]; got != 2 {
		t.Errorf(`Ignored()["name"] = %d, want 2`, got)
	}
}
