package sockettest

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Dir returns a new directory with a short path, removed when the test
// ends: t.TempDir's long paths can overflow sun_path on macOS. Its
// clean-up ignores errors, as os.RemoveAll fails under wine.
func Dir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "pr")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// SkipWithoutAFUnix skips the test if err says that the system has no
// AF_UNIX sockets (Windows before 10 1803, or wine).
func SkipWithoutAFUnix(tb testing.TB, err error) {
	tb.Helper()
	if err != nil && afUnixUnsupported(err) {
		tb.Skipf("AF_UNIX sockets are not supported here: %v", err)
	}
}

// Listen listens on a unix socket at path, skipping the test where there
// are no AF_UNIX sockets. Closing the listener removes the socket file.
func Listen(tb testing.TB, path string) net.Listener {
	tb.Helper()
	l, err := net.Listen("unix", path)
	SkipWithoutAFUnix(tb, err)
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

// Stale leaves a socket file at path with nobody listening, as a process
// that crashed does.
func Stale(tb testing.TB, path string) {
	tb.Helper()
	l := Listen(tb, path)
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
}

// Buffer is a bytes.Buffer safe for concurrent use: one goroutine or
// process writes while the test reads.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Run returns name below an absolute directory of this OS ("/run" on
// unix, the system drive's "\run" on Windows), for an endpoint that a test
// never dials: plugreg takes only absolute endpoints.
func Run(name string) string {
	root := filepath.VolumeName(os.TempDir()) + string(filepath.Separator)
	return filepath.Join(root, "run", name)
}
