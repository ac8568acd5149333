//go:build unix

package api

import (
	"errors"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
)

// owner returns the mode bits and GID of the file at path.
func owner(t *testing.T, path string) (fs.FileMode, int) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm(), int(fi.Sys().(*syscall.Stat_t).Gid)
}

func TestListenAPINoGroup(t *testing.T) {
	t.Parallel()
	path := filepath.Join(sockettest.Dir(t), "api.sock")
	l, err := ListenAPI(path, "")
	if err != nil {
		t.Fatalf("ListenAPI(%q, \"\") error = %v", path, err)
	}
	defer l.Close()
	// The group is the process's (Linux) or the directory's (BSD): not set.
	if mode, _ := owner(t, path); mode != 0o600 {
		t.Errorf("socket mode %v, want 0600", mode)
	}
}

// TestListenAPIGroup checks the group and mode of the socket, and of the
// directory ListenAPI creates for it. Changing a file's group to one the
// user is not in needs root.
func TestListenAPIGroup(t *testing.T) {
	sockettest.NeedRoot(t, "to give the socket a group the user is not in")
	tests := []struct {
		name  string
		group func(t *testing.T) (group string, gid int)
	}{
		{"numeric", func(*testing.T) (string, int) { return "4242", 4242 }},
		{"root by number", func(*testing.T) (string, int) { return "0", 0 }},
		{"by name", func(t *testing.T) (string, int) {
			for _, name := range []string{"daemon", "nogroup", "nobody", "staff", "wheel", "bin", "sys"} {
				g, err := user.LookupGroup(name)
				if err != nil {
					continue
				}
				gid, err := strconv.Atoi(g.Gid)
				if err != nil || gid == 0 {
					continue
				}
				return name, gid
			}
			sockettest.SkipAccess(t, "no group other than root's found by name on this system")
			return "", 0
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			group, gid := tc.group(t)
			dir := filepath.Join(sockettest.Dir(t), "run", "plugreg")
			path := filepath.Join(dir, "api.sock")
			l, err := ListenAPI(path, group)
			if err != nil {
				t.Fatalf("ListenAPI(%q, %q) error = %v", path, group, err)
			}
			defer l.Close()
			if mode, got := owner(t, path); mode != 0o660 || got != gid {
				t.Errorf("socket mode %v, gid %d; want 0660 and gid %d", mode, got, gid)
			}
			for _, d := range []string{dir, filepath.Dir(dir)} {
				if mode, got := owner(t, d); mode != 0o750 || got != gid {
					t.Errorf("created directory %s: mode %v, gid %d; want 0750 and gid %d", d, mode, got, gid)
				}
			}
		})
	}
}

// TestListenAPIGroupKeepsExistingDir checks that a directory that exists is
// not given the group.
func TestListenAPIGroupKeepsExistingDir(t *testing.T) {
	sockettest.NeedRoot(t, "to give the socket a group the user is not in")
	t.Parallel()
	dir := sockettest.Dir(t)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_, before := owner(t, dir)
	l, err := ListenAPI(filepath.Join(dir, "api.sock"), "4242")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if mode, gid := owner(t, dir); mode != 0o755 || gid != before {
		t.Errorf("existing directory: mode %v, gid %d; want it left at 0755, gid %d", mode, gid, before)
	}
}

func TestListenAPIUnknownGroup(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(sockettest.Dir(t), "sub")
	path := filepath.Join(dir, "api.sock")
	const group = "plugreg-no-such-group"
	l, err := ListenAPI(path, group)
	if err == nil {
		l.Close()
		t.Fatalf("ListenAPI(%q, %q) = nil error, want an unknown group", path, group)
	}
	if want := `api socket group "` + group + `"`; !strings.Contains(err.Error(), want) {
		t.Errorf("ListenAPI(%q, %q) error = %q, want one naming the group: %s", path, group, err, want)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ListenAPI with an unknown group created %s: %v", dir, err)
	}
}

func TestListenUnixPathTooLong(t *testing.T) {
	t.Parallel()
	dir := sockettest.Dir(t)
	path := filepath.Join(dir, strings.Repeat("x", maxSocketPath-len(dir)))
	l, err := ListenUnix(path, 0)
	if err == nil {
		l.Close()
		t.Fatalf("ListenUnix(%d-byte path) = nil error, want too long", len(path))
	}
	if want := "longer than the " + strconv.Itoa(maxSocketPath) + "-byte limit"; !strings.Contains(err.Error(), want) {
		t.Errorf("ListenUnix(%d-byte path) error = %q, want %q", len(path), err, want)
	}
	// The longest path that fits is bound.
	path = path[:len(path)-1]
	l, err = ListenUnix(path, 0)
	if err != nil {
		t.Fatalf("ListenUnix(%d-byte path) error = %v", len(path), err)
	}
	l.Close()
}
