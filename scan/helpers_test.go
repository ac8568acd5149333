package scan

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tempDir returns a new, short, symlink-free directory: os.MkdirTemp("",
// "scn") rather than t.TempDir(), whose long paths can overflow sun_path.
// Its clean-up ignores errors: os.RemoveAll fails under wine.
func tempDir(tb testing.TB) string {
	tb.Helper()
	d, err := os.MkdirTemp("", "scn")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(d) })
	// macOS's temp dir is behind a symlink; the scanner reports resolved paths.
	r, err := filepath.EvalSymlinks(d)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// needUnixSockets skips the test when this system cannot create unix-domain
// sockets: Windows before 10 1803, and wine.
func needUnixSockets(tb testing.TB) {
	tb.Helper()
	d := tempDir(tb)
	l, err := net.Listen("unix", filepath.Join(d, "probe"))
	if err != nil {
		tb.Skipf("no AF_UNIX sockets on this system (Windows 10 1803 or later is needed, and wine has none): %v", err)
	}
	l.Close()
}

// socketFile leaves a socket file at path: bound, then closed without
// removing the file, as a plugin that crashed would. It fails the test if
// it cannot; call needUnixSockets first.
func socketFile(tb testing.TB, path string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := makeSocketFile(path); err != nil {
		tb.Fatalf("bind %s: %v", path, err)
	}
}

// writeFile creates a regular file at path, and its directory.
func writeFile(tb testing.TB, path string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// testLog returns a logger that writes to the test log and to the returned
// buffer, without times.
func testLog(t *testing.T) (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	h := slog.NewTextHandler(io.MultiWriter(&buf, t.Output()), &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})
	return slog.New(h), &buf
}

// count returns how often the log message msg was logged.
func count(buf *bytes.Buffer, msg string) int {
	return strings.Count(buf.String(), `msg="`+msg+`"`)
}

// wantLogged checks that buf holds the log lines with the messages in want,
// each as many times as want says, and no other lines.
func wantLogged(t *testing.T, buf *bytes.Buffer, want map[string]int) {
	t.Helper()
	lines := 0
	for msg, n := range want {
		if got := count(buf, msg); got != n {
			t.Errorf("logged %q %d times, want %d", msg, got, n)
		}
		lines += n
	}
	if got := strings.Count(buf.String(), "\n"); got != lines {
		t.Errorf("logged %d lines, want %d", got, lines)
	}
	if t.Failed() {
		t.Logf("log:\n%s", buf)
	}
}

// mustNew is New for tests.
func mustNew(t *testing.T, log *slog.Logger, dirs ...string) *Scanner {
	t.Helper()
	s, err := New(dirs, log)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// mustScan scans and fails the test on an error.
func mustScan(t *testing.T, s *Scanner) Snapshot {
	t.Helper()
	snap, err := s.Scan()
	if err != nil {
		t.Fatalf("Scan() error = %v", err)
	}
	return snap
}

// paths returns the paths of s.
func paths(s Snapshot) []string {
	var ps []string
	for _, e := range s.Entries {
		ps = append(ps, e.Path)
	}
	return ps
}

// join joins root and the slash-separated rel paths.
func join(root string, rel ...string) []string {
	var ps []string
	for _, r := range rel {
		ps = append(ps, filepath.Join(root, filepath.FromSlash(r)))
	}
	return ps
}
