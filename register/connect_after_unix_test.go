//go:build unix

package register

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
)

// TestConnectCheckedAfterTheConnect: the checks around a connect by path
// are made after it too, so that a change made while it ran (the socket
// bound again at its path, a directory below the plugin directory swapped
// for a symlink) fails the connect as "path changed" even though the
// checks before it passed. The connect here stands for the race: it makes
// the change, as another process would between the two checks.
func TestConnectCheckedAfterTheConnect(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, sub, elsewhere string, other *sink)
		want   error
	}{
		{"socket replaced", replaceSocket, errSwapped},
		{"directory moved, a symlink to it in its place", moveAndLink, errSymlinked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, sub, elsewhere := swapDirs(t)
			path := filepath.Join(sub, "a.sock")
			rawListener(t, path, (&sink{}).serve)
			backdate(t, path)
			before, err := socketAt(dir, path, false)
			if err != nil {
				t.Fatal(err)
			}
			connects := 0
			_, err = connectChecked(dir, path, before.id, false, func() error {
				connects++
				tc.change(t, sub, elsewhere, &sink{})
				return nil
			})
			if connects != 1 {
				t.Fatalf("connect ran %d times, want 1", connects)
			}
			if !errors.Is(err, errSwapped) || !errors.Is(err, tc.want) || !pathChanged(err) {
				t.Errorf("connectChecked = %v, want a path changed: %v", err, tc.want)
			}
		})
	}
}

// rebindTries bounds how often TestConnectRefusesTheSameInodeWithOtherTimes
// binds a socket again at its path for the file system to give it the inode
// of the socket just removed: ext4 does at the first try, tmpfs never.
const rebindTries = 50

// TestConnectRefusesTheSameInodeWithOtherTimes: a socket at the path after
// the connect that has the inode of the one before it but other times is
// another socket, and the connect fails as "path changed" (README threat
// model: the socket is the one the scan saw, device, inode and times). The
// scan sees the new socket as a new incarnation and registers it. It is
// made so twice: the socket closed, removed and bound again until the file
// system gives it the old inode (where it does), and the same inode linked
// again at the path and touched (everywhere).
func TestConnectRefusesTheSameInodeWithOtherTimes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, path, side string, l net.Listener, ino uint64)
	}{
		{"bound again with its inode", rebindWithInode},
		{"linked again and touched", relinkAndTouch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := unixDir(t)
			path, side := filepath.Join(dir, "a.sock"), filepath.Join(dir, "side")
			l := sockettest.Listen(t, path)
			t.Cleanup(func() { l.Close() })
			backdate(t, path)
			before, err := socketAt(dir, path, false)
			if err != nil {
				t.Fatal(err)
			}
			_, err = connectChecked(dir, path, before.id, false, func() error {
				tc.change(t, path, side, l, before.id.Ino)
				return nil
			})
			again, serr := socketAt(dir, path, false)
			if serr != nil || again.id.Dev != before.id.Dev || again.id.Ino != before.id.Ino || again.id == before.id {
				t.Fatalf("socket after the change: %+v, %v; want the inode of %+v with other times", again.id, serr, before.id)
			}
			if !errors.Is(err, errSwapped) || !pathChanged(err) {
				t.Errorf("connectChecked = %v, want a path changed: %v", err, errSwapped)
			}
		})
	}
}

// rebindWithInode closes l, the socket at path, and binds a socket there
// again until it gets the inode ino back, at most rebindTries times; it
// skips the test where the file system gives a new socket a new inode.
func rebindWithInode(t *testing.T, path, _ string, l net.Listener, ino uint64) {
	t.Helper()
	if err := l.Close(); err != nil { // removes the socket file
		t.Fatal(err)
	}
	for range rebindTries {
		nl := sockettest.Listen(t, path)
		got, err := socketFile(path, false)
		if err != nil {
			t.Fatal(err)
		}
		if got.id.Ino == ino {
			t.Cleanup(func() { nl.Close() })
			return
		}
		nl.Close()
	}
	t.Skipf("a socket bound again %d times at %s never got the inode %d back: this file system does not reuse inodes at once (the linked case checks the rule here)", rebindTries, path, ino)
}

// relinkAndTouch gives the socket at path, kept as side, a new link at
// path, and new times: the inode of the socket before, other times.
func relinkAndTouch(t *testing.T, path, side string, _ net.Listener, _ uint64) {
	t.Helper()
	if err := os.Link(path, side); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(side, path); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := os.Chtimes(path, now, now); err != nil {
		t.Fatal(err)
	}
}
