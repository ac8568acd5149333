//go:build unix

package private

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
)

// nobody is an unprivileged uid and gid that owns nothing on the machine.
const nobody = 65534

// mkdirOwned makes dir with mode and owner uid:gid, whatever the umask.
func mkdirOwned(t *testing.T, dir string, mode os.FileMode, uid, gid int) string {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeOwned writes an empty file owned by uid.
func writeOwned(t *testing.T, path string, uid int) string {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, -1); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCheckPrivateUnix(t *testing.T) {
	sockettest.NeedRoot(t, "to give directories to another user")
	for _, tc := range []struct {
		name string
		// setup makes the tree under base and returns the file to check
		// and the directory that the error must name ("": no error).
		setup func(t *testing.T, base string) (path, bad string)
		want  string // the error after "directory BAD", or after the path for a file
	}{
		{"root 0755", func(t *testing.T, b string) (string, string) {
			return filepath.Join(mkdirOwned(t, b+"/d", 0o755, 0, 0), "state.json"), ""
		}, ""},
		{"root 0770 group root", func(t *testing.T, b string) (string, string) {
			return filepath.Join(mkdirOwned(t, b+"/d", 0o770, 0, 0), "state.json"), ""
		}, ""},
		{"owned by another user", func(t *testing.T, b string) (string, string) {
			d := mkdirOwned(t, b+"/d", 0o755, nobody, 0)
			return filepath.Join(d, "state.json"), d
		}, " is owned by uid 65534 (mode drwxr-xr-x)"},
		{"writable by every user", func(t *testing.T, b string) (string, string) {
			d := mkdirOwned(t, b+"/d", 0o777, 0, 0)
			return filepath.Join(d, "api.sock"), d
		}, " is writable by every user (owner uid 0, mode drwxrwxrwx)"},
		{"writable by every user, sticky", func(t *testing.T, b string) (string, string) {
			d := mkdirOwned(t, b+"/d", 0o777|os.ModeSticky, 0, 0)
			return filepath.Join(d, "state.json"), d
		}, " is writable by every user (owner uid 0, mode dtrwxrwxrwx): the sticky bit does not stop another user from creating the path first"},
		{"missing, parent writable by every user, sticky", func(t *testing.T, b string) (string, string) {
			p := mkdirOwned(t, b+"/p", 0o777|os.ModeSticky, 0, 0)
			return filepath.Join(p, "a", "api.sock"), p
		}, " is writable by every user (owner uid 0, mode dtrwxrwxrwx): the sticky bit does not stop another user from creating the path first"},
		{"parent writable by every user, sticky", func(t *testing.T, b string) (string, string) {
			p := mkdirOwned(t, b+"/p", 0o777|os.ModeSticky, 0, 0)
			return filepath.Join(mkdirOwned(t, p+"/d", 0o755, 0, 0), "state.json"), ""
		}, ""},
		{"writable by another group", func(t *testing.T, b string) (string, string) {
			d := mkdirOwned(t, b+"/d", 0o775, 0, nobody)
			return filepath.Join(d, "state.json"), d
		}, " is writable by group 65534 (owner uid 0, mode drwxrwxr-x)"},
		{"readable by another group", func(t *testing.T, b string) (string, string) {
			return filepath.Join(mkdirOwned(t, b+"/d", 0o750, 0, nobody), "api.sock"), ""
		}, ""},
		{"parent owned by another user", func(t *testing.T, b string) (string, string) {
			p := mkdirOwned(t, b+"/p", 0o755, nobody, nobody)
			return filepath.Join(mkdirOwned(t, p+"/d", 0o755, 0, 0), "state.json"), p
		}, " is owned by uid 65534 (mode drwxr-xr-x)"},
		{"parent writable by every user", func(t *testing.T, b string) (string, string) {
			p := mkdirOwned(t, b+"/p", 0o777, 0, 0)
			return filepath.Join(mkdirOwned(t, p+"/d", 0o755, 0, 0), "state.json"), p
		}, " is writable by every user (owner uid 0, mode drwxrwxrwx)"},
		{"parent writable by another group", func(t *testing.T, b string) (string, string) {
			p := mkdirOwned(t, b+"/p", 0o775, 0, nobody)
			return filepath.Join(mkdirOwned(t, p+"/d", 0o755, 0, 0), "state.json"), ""
		}, ""},
		{"missing, parent writable by every user", func(t *testing.T, b string) (string, string) {
			p := mkdirOwned(t, b+"/p", 0o777, 0, 0)
			return filepath.Join(p, "a", "b", "state.json"), p
		}, " is writable by every user (owner uid 0, mode drwxrwxrwx)"},
		{"missing, parent root 0755", func(t *testing.T, b string) (string, string) {
			return filepath.Join(mkdirOwned(t, b+"/p", 0o755, 0, 0), "a", "state.json"), ""
		}, ""},
		{"symlink to a directory of another user", func(t *testing.T, b string) (string, string) {
			d := mkdirOwned(t, b+"/d", 0o755, nobody, 0)
			if err := os.Symlink(d, b+"/link"); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(b, "link", "state.json"), d
		}, " is owned by uid 65534 (mode drwxr-xr-x)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := privateTempDir(t)
			path, bad := tc.setup(t, base)
			err := Check(path)
			switch {
			case bad == "" && err != nil:
				t.Errorf("Check(%q) error = %v, want nil", path, err)
			case bad == "":
			case err == nil:
				t.Errorf("Check(%q) = nil, want an error naming %s", path, bad)
			default:
				want := "directory " + bad + tc.want + ": make it owned by root and not writable by other users"
				if err.Error() != want {
					t.Errorf("Check(%q) error = %q, want %q", path, err, want)
				}
			}
		})
	}
}

// TestCheckPrivateFileOwner checks the file itself, in a directory only
// root may write to: one that another user owns, or may write to, is
// refused, and so is a symlink to such a file, which is followed.
func TestCheckPrivateFileOwner(t *testing.T) {
	sockettest.NeedRoot(t, "to give a file to another user")
	for _, tc := range []struct {
		name      string
		uid, gid  int
		mode      os.FileMode
		symlinked bool   // path is a symlink to the file
		want      string // after the file's path; "": no error
	}{
		{"root", 0, 0, 0o600, false, ""},
		{"root, executable", 0, 0, 0o755, false, ""},
		{"root, writable by group root", 0, 0, 0o775, false, ""},
		{"another user", 1001, 0, 0o600, false, " is owned by uid 1001 (mode -rw-------): remove it, or make it owned by root"},
		{"root, writable by every user", 0, 0, 0o757, false, " is writable by every user (owner uid 0, mode -rwxr-xrwx): make it writable by its owner only (chmod go-w)"},
		{"root, writable by another group", 0, 1001, 0o775, false, " is writable by group 1001 (owner uid 0, mode -rwxrwxr-x): make it writable by its owner only (chmod go-w)"},
		{"symlink to root's", 0, 0, 0o755, true, ""},
		{"symlink to another user's", 1001, 0, 0o755, true, " is owned by uid 1001 (mode -rwxr-xr-x): remove it, or make it owned by root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := mkdirOwned(t, privateTempDir(t)+"/d", 0o755, 0, 0)
			file := writeOwned(t, filepath.Join(d, "file"), tc.uid)
			if err := os.Chown(file, tc.uid, tc.gid); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(file, tc.mode); err != nil {
				t.Fatal(err)
			}
			path := file
			if tc.symlinked {
				path = filepath.Join(d, "link")
				if err := os.Symlink("file", path); err != nil {
					t.Fatal(err)
				}
			}
			err := Check(path)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Check(%q) error = %v, want nil", path, err)
			case tc.want == "":
			case err == nil || err.Error() != file+tc.want:
				t.Errorf("Check(%q) error = %v, want %q", path, err, file+tc.want)
			}
		})
	}
}

// TestCheckPrivateSocketWriters: a socket that a group or every user may
// write to, and so connect to (the API socket of an agent run with
// --api-group, left behind by a kill), is accepted: writing to a socket
// does not replace it. One that another user owns is not.
func TestCheckPrivateSocketWriters(t *testing.T) {
	sockettest.NeedRoot(t, "to give a socket to another user")
	for _, tc := range []struct {
		name     string
		uid, gid int
		mode     os.FileMode
		want     string // after the socket's path; "": no error
	}{
		{"group may connect", 0, 1001, 0o660, ""},
		{"everyone may connect", 0, 0, 0o666, ""},
		{"another user's", 1001, 0, 0o600, " is owned by uid 1001 (mode Srw-------): remove it, or make it owned by root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := mkdirOwned(t, privateTempDir(t)+"/d", 0o755, 0, 0)
			path := filepath.Join(d, "api.sock")
			l, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if err := os.Chown(path, tc.uid, tc.gid); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tc.mode); err != nil {
				t.Fatal(err)
			}
			err = Check(path)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Check(%q) error = %v, want nil", path, err)
			case tc.want == "":
			case err == nil || err.Error() != path+tc.want:
				t.Errorf("Check(%q) error = %v, want %q", path, err, path+tc.want)
			}
		})
	}
}

// TestCheckPrivateModes: the rules on who else may write, which hold
// whoever runs the agent, and which a test of any uid can prove on what it
// owns: a directory every user may write to is refused, where the file is
// and above it, sticky or not where the file is; one the agent's group may
// write to is refused where the file is, unless that group is root's; a
// file every user or the group may write to is refused, a socket is not.
func TestCheckPrivateModes(t *testing.T) {
	for _, tc := range privateModeCases(os.Geteuid(), os.Getegid()) {
		t.Run(tc.name, func(t *testing.T) {
			path, want := tc.setup(t, privateTempDir(t))
			switch err := Check(path); {
			case want == "" && err != nil:
				t.Errorf("Check(%q) error = %v, want nil", path, err)
			case want != "" && (err == nil || err.Error() != want):
				t.Errorf("Check(%q) error = %v, want %q", path, err, want)
			}
		})
	}
}

// privateModeCase is a case of TestCheckPrivateModes: setup makes the tree
// under base and returns the path to check and the error wanted ("": none).
type privateModeCase struct {
	name  string
	setup func(t *testing.T, base string) (path, want string)
}

// privateModeCases returns the cases of TestCheckPrivateModes for a test
// of uid and gid.
func privateModeCases(uid, gid int) []privateModeCase {
	const dirAdvice, fileAdvice = "make it owned by root and not writable by other users", "make it writable by its owner only (chmod go-w)"
	everyone := func(what, mode, advice string) string {
		return fmt.Sprintf("%s is writable by every user (owner uid %d, mode %s): %s", what, uid, mode, advice)
	}
	group := func(what, mode, advice string) string {
		if gid == 0 {
			return "" // root's group may write
		}
		return fmt.Sprintf("%s is writable by group %d (owner uid %d, mode %s): %s", what, gid, uid, mode, advice)
	}
	return []privateModeCase{
		{"directory 0755", func(t *testing.T, b string) (string, string) {
			return filepath.Join(mkdirMode(t, b+"/d", 0o755), "state.json"), ""
		}},
		{"directory writable by every user", func(t *testing.T, b string) (string, string) {
			return filepath.Join(mkdirMode(t, b+"/d", 0o777), "api.sock"), everyone("directory "+b+"/d", "drwxrwxrwx", dirAdvice)
		}},
		{"directory writable by every user, sticky", func(t *testing.T, b string) (string, string) {
			return filepath.Join(mkdirMode(t, b+"/d", 0o777|os.ModeSticky), "state.json"),
				everyone("directory "+b+"/d", "dtrwxrwxrwx", "the sticky bit does not stop another user from creating the path first: "+dirAdvice)
		}},
		{"parent writable by every user", func(t *testing.T, b string) (string, string) {
			mkdirMode(t, b+"/p", 0o777)
			return filepath.Join(mkdirMode(t, b+"/p/d", 0o755), "state.json"), everyone("directory "+b+"/p", "drwxrwxrwx", dirAdvice)
		}},
		{"parent writable by every user, sticky", func(t *testing.T, b string) (string, string) {
			mkdirMode(t, b+"/p", 0o777|os.ModeSticky)
			return filepath.Join(mkdirMode(t, b+"/p/d", 0o755), "state.json"), ""
		}},
		{"directory writable by its group", func(t *testing.T, b string) (string, string) {
			return filepath.Join(mkdirMode(t, b+"/d", 0o775), "state.json"), group("directory "+b+"/d", "drwxrwxr-x", dirAdvice)
		}},
		{"parent writable by its group", func(t *testing.T, b string) (string, string) {
			mkdirMode(t, b+"/p", 0o775)
			return filepath.Join(mkdirMode(t, b+"/p/d", 0o755), "state.json"), ""
		}},
		{"file writable by every user", func(t *testing.T, b string) (string, string) {
			f := writeMode(t, filepath.Join(mkdirMode(t, b+"/d", 0o755), "file"), 0o757)
			return f, everyone(f, "-rwxr-xrwx", fileAdvice)
		}},
		{"file writable by its group", func(t *testing.T, b string) (string, string) {
			f := writeMode(t, filepath.Join(mkdirMode(t, b+"/d", 0o755), "file"), 0o775)
			return f, group(f, "-rwxrwxr-x", fileAdvice)
		}},
		{"symlink to a file writable by every user", func(t *testing.T, b string) (string, string) {
			f := writeMode(t, filepath.Join(mkdirMode(t, b+"/d", 0o755), "file"), 0o757)
			if err := os.Symlink("file", b+"/d/link"); err != nil {
				t.Fatal(err)
			}
			return b + "/d/link", everyone(f, "-rwxr-xrwx", fileAdvice)
		}},
		{"socket every user may connect to", func(t *testing.T, b string) (string, string) {
			path := filepath.Join(mkdirMode(t, b+"/d", 0o755), "api.sock")
			l := sockettest.Listen(t, path)
			t.Cleanup(func() { l.Close() })
			if err := os.Chmod(path, 0o666); err != nil {
				t.Fatal(err)
			}
			return path, ""
		}},
	}
}

// mkdirMode makes dir with mode, whatever the umask.
func mkdirMode(t *testing.T, dir string, mode os.FileMode) string {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeMode writes an empty file with mode, whatever the umask.
func writeMode(t *testing.T, path string, mode os.FileMode) string {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

// privateTempDir returns a new directory owned by root, mode 0700, with
// its symbolic links resolved (macOS's /tmp is /private/tmp), so that the
// errors name the directories as Check sees them.
func privateTempDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(sockettest.Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(d, "/") {
		t.Fatalf("temporary directory %q is not absolute", d)
	}
	return d
}
