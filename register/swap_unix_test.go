//go:build unix

package register

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plugreg/plugreg/plugins/example"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/scan"
)

// sink is a socket that counts the connections it accepts and the bytes
// sent to it, as they come, and never answers.
type sink struct{ conns, bytes atomic.Int64 }

func (s *sink) serve(c net.Conn) {
	s.conns.Add(1)
	io.Copy(s, c)
}

func (s *sink) Write(b []byte) (int, error) {
	s.bytes.Add(int64(len(b)))
	return len(b), nil
}

// TestRegisterDialsTheSocketScanned: a registration connects only to the
// socket the scan saw at its path. A directory below the plugin directory
// swapped for a symlink since the scan, or the socket file replaced, is
// refused before the connect: the socket behind the symlink, or the new
// one, gets no connection and no byte. With Dirs, the symlink is refused
// even when it leads to the very socket scanned; without, the socket file's
// identity (device, inode and times) is what is checked.
func TestRegisterDialsTheSocketScanned(t *testing.T) {
	h := handler.NewHandlers()
	h.Add("CSIPlugin", handler.DefaultAccept()[0])
	for _, tc := range []struct {
		name    string
		dirs    bool // Client.Dirs holds the plugin directory
		change  func(t *testing.T, sub, elsewhere string, other *sink)
		want    error // nil: registered
		toOther bool  // the change puts the other socket at the path
	}{
		{"unchanged", true, func(*testing.T, string, string, *sink) {}, nil, false},
		{"directory swapped for a symlink to another socket", true, swapForOther, errSymlinked, true},
		{"directory swapped for a symlink to another socket, no Dirs", false, swapForOther, errNotRegistered, true},
		{"directory moved, a symlink to it in its place", true, moveAndLink, errSymlinked, false},
		{"directory moved, a symlink to it in its place, no Dirs", false, moveAndLink, nil, false},
		{"socket replaced", true, replaceSocket, errNotRegistered, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, sub, elsewhere := swapDirs(t)
			path := filepath.Join(sub, "a.sock")
			var calls atomic.Int32
			servePlugin(t, path, &example.Plugin{Info: csiInfo("real", ""), Ready: counting(&calls)})
			backdate(t, path)
			sc, err := scan.New([]string{dir}, nil)
			if err != nil {
				t.Fatal(err)
			}
			snap, err := sc.Scan()
			if err != nil || len(snap.Entries) != 1 || snap.Entries[0].Path != path {
				t.Fatalf("scan = %v, %v; want %s alone", snap.Entries, err, path)
			}
			other := &sink{}
			tc.change(t, sub, elsewhere, other)

			// A plugin that answers has as long as the test waits; a
			// connection to the other socket, which never answers, fails
			// the test whatever the timeout.
			c := &Client{Handlers: h, GetInfoTimeout: eventTimeout}
			if tc.dirs {
				c.Dirs = sc.Dirs()
			}
			p, err := c.Register(t.Context(), path, snap.Entries[0].ID)
			switch {
			case tc.want == nil && err != nil:
				t.Errorf("Register = %v, want it registered", err)
			case tc.want == nil && p.Name != "real":
				t.Errorf("Register registered %q, want real", p.Name)
			case tc.want != nil && (!errors.Is(err, tc.want) || !pathChanged(err) || isRejection(err)):
				t.Errorf("Register = %v, want a failure: %v", err, tc.want)
			}
			if n, b := other.conns.Load(), other.bytes.Load(); n != 0 || b != 0 {
				t.Errorf("the other socket got %d connections and %d bytes, want none", n, b)
			}
			if n := calls.Load(); tc.want != nil && n != 0 {
				t.Errorf("the socket scanned got %d GetInfo calls through the symlink, want 0", n)
			}
		})
	}
}

// swapDirs returns a fresh plugin directory dir holding a directory sub,
// and another fresh directory elsewhere.
func swapDirs(t *testing.T) (dir, sub, elsewhere string) {
	t.Helper()
	dir, elsewhere = unixDir(t), unixDir(t)
	sub = filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, sub, elsewhere
}

// backdate sets the times of the socket file at path an hour back, as
// those of a socket bound a while ago: a socket bound at its path in its
// place differs by them, whatever its inode.
func backdate(t *testing.T, path string) {
	t.Helper()
	hourAgo := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, hourAgo, hourAgo); err != nil {
		t.Fatal(err)
	}
}

// swapForOther moves sub away, and puts in its place a symlink to a
// directory where other serves a socket of the same name.
func swapForOther(t *testing.T, sub, elsewhere string, other *sink) {
	t.Helper()
	target := filepath.Join(elsewhere, "target")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	rawListener(t, filepath.Join(target, "a.sock"), other.serve)
	if err := os.Rename(sub, filepath.Join(elsewhere, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, sub); err != nil {
		t.Fatal(err)
	}
}

// moveAndLink moves sub away, and puts in its place a symlink to it.
func moveAndLink(t *testing.T, sub, elsewhere string, _ *sink) {
	t.Helper()
	moved := filepath.Join(elsewhere, "moved")
	if err := os.Rename(sub, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(moved, sub); err != nil {
		t.Fatal(err)
	}
}

// replaceSocket binds other at the path of sub's socket in its place.
func replaceSocket(t *testing.T, sub, _ string, other *sink) {
	t.Helper()
	path := filepath.Join(sub, "a.sock")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	rawListener(t, path, other.serve)
}
