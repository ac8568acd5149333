//go:build unix

package register

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/example"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/scan"
)

// TestSymlinkNotFollowed: the scan never follows a symlink, and neither
// does the registration: a symlink put at a scanned socket's path, to a
// socket the agent would accept, is refused before any call, with or
// without AllowUIDs; so is a file that is not a socket.
func TestSymlinkNotFollowed(t *testing.T) {
	dir := unixDir(t)
	real := filepath.Join(dir, "real.sock")
	var calls atomic.Int32
	servePlugin(t, real, &example.Plugin{Info: csiInfo("real", ""), Ready: counting(&calls)})
	link, file := filepath.Join(dir, "link.sock"), filepath.Join(dir, "file.sock")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	h := handler.NewHandlers()
	h.Add("CSIPlugin", handler.DefaultAccept()[0])
	for _, allow := range [][]uint32{nil, {uint32(os.Getuid())}} {
		c := &Client{Handlers: h, AllowUIDs: allow}
		for _, path := range []string{link, file} {
			_, err := c.Register(t.Context(), path, scan.ID{})
			if !errors.Is(err, errNotSocket) || isRejection(err) {
				t.Errorf("AllowUIDs %v: Register(%s) = %v, want a failure: not a socket", allow, filepath.Base(path), err)
			}
			if err := c.InfoCheck(t.Context(), plugins.Plugin{SocketPath: path}); !errors.Is(err, errNotSocket) {
				t.Errorf("AllowUIDs %v: Probe(%s) = %v, want a failure: not a socket", allow, filepath.Base(path), err)
			}
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the socket behind the symlink got %d GetInfo calls, want 0", n)
	}
	// The socket itself registers.
	if _, err := (&Client{Handlers: h}).Register(t.Context(), real, scan.ID{}); err != nil {
		t.Errorf("Register(real.sock) = %v", err)
	}
}

// TestSocketFileSaysWhatIsThere: a path that is not a socket is refused
// with its mode, as ls shows it, from the one lstat that found it.
func TestSocketFileSaysWhatIsThere(t *testing.T) {
	dir := t.TempDir()
	kinds := map[string]func(path string) error{
		"regular file": func(p string) error { return os.WriteFile(p, nil, 0o640) },
		"directory":    func(p string) error { return os.Mkdir(p, 0o750) },
		"symlink":      func(p string) error { return os.Symlink("elsewhere", p) },
		"fifo":         func(p string) error { return unix.Mkfifo(p, 0o600) },
	}
	for name, create := range kinds {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
			if err := create(path); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Lstat(path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = socketFile(path, false)
			if want := "(mode " + fi.Mode().String() + ")"; !errors.Is(err, errNotSocket) || !strings.Contains(err.Error(), want) {
				t.Errorf("socketFile(%s) = %v, want errNotSocket with %q", name, err, want)
			}
		})
	}
}

// TestSocketFileIsScanID: the identity the dial checks take of a socket is
// the one the scan took, so a scanned plugin registers, and socketFile adds
// no allocation to scan.StatSocket's (it runs for every liveness check).
// Not parallel: AllocsPerRun.
func TestSocketFileIsScanID(t *testing.T) {
	dir := unixDir(t)
	path := filepath.Join(dir, "a.sock")
	servePlugin(t, path, &example.Plugin{Info: csiInfo("a", "")})
	s, err := scan.New([]string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.Scan()
	if err != nil || len(snap.Entries) != 1 {
		t.Fatalf("Scan() = %v, %v, want a.sock", snap, err)
	}
	file, err := socketFile(path, false)
	if err != nil || !file.is(snap.Entries[0].ID) || file.uid != uint32(os.Getuid()) {
		t.Errorf("socketFile(a.sock) = %+v, %v, want the scan's ID %+v, owned by uid %d", file, err, snap.Entries[0].ID, os.Getuid())
	}
	want := testing.AllocsPerRun(20, func() { _, _ = scan.StatSocket(path) })
	if n := testing.AllocsPerRun(20, func() { _, _ = socketFile(path, false) }); n > want {
		t.Errorf("socketFile allocates %v times, scan.StatSocket %v", n, want)
	}
	h := handler.NewHandlers()
	h.Add("CSIPlugin", handler.DefaultAccept()[0])
	if _, err := (&Client{Handlers: h, Dirs: []string{dir}}).Register(t.Context(), path, snap.Entries[0].ID); err != nil {
		t.Errorf("Register(a.sock, the scan's ID) = %v", err)
	}
}
