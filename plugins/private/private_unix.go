//go:build unix

package private

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// privateAdvice tells how to fix a directory that Check refuses.
const privateAdvice = "make it owned by root and not writable by other users"

// checkPrivate is Check on unix.
func checkPrivate(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	dir, exact, err := closestDir(filepath.Dir(abs))
	if err != nil {
		return err
	}
	for d := dir; ; d = filepath.Dir(d) {
		home := d == dir
		if err := checkDirOwner(d, home, home && exact); err != nil {
			return err
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	if !exact {
		return nil // no file in a missing directory
	}
	fi, err := os.Lstat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.Mode().Type() == fs.ModeSymlink:
		// The link cannot be replaced (its directory was checked); what
		// it names is checked as if it had been given.
		target, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return err
		}
		return checkPrivate(target)
	}
	st := fi.Sys().(*syscall.Stat_t)
	switch mode := fi.Mode(); {
	case !trustedUID(st.Uid):
		return fmt.Errorf("%s is owned by uid %d (mode %v): remove it, or make it owned by root", abs, st.Uid, mode)
	case mode.Type() == fs.ModeSocket:
		// Who may write to a socket may connect to it, not replace it.
	case mode&0o002 != 0:
		return fmt.Errorf("%s is writable by every user (owner uid %d, mode %v): %s", abs, st.Uid, mode, privateFileAdvice)
	case mode&0o020 != 0 && st.Gid != 0:
		return fmt.Errorf("%s is writable by group %d (owner uid %d, mode %v): %s", abs, st.Gid, st.Uid, mode, privateFileAdvice)
	}
	return nil
}

// privateFileAdvice tells how to fix a file that Check refuses.
const privateFileAdvice = "make it writable by its owner only (chmod go-w)"

// closestDir returns dir, or its closest ancestor that exists if dir does
// not, with symbolic links resolved, and whether it is dir itself.
func closestDir(dir string) (string, bool, error) {
	for d := dir; ; d = filepath.Dir(d) {
		r, err := filepath.EvalSymlinks(d)
		if err == nil {
			return r, d == dir, nil
		}
		if !errors.Is(err, fs.ErrNotExist) || d == filepath.Dir(d) {
			return "", false, err
		}
	}
}

// checkDirOwner checks one directory: its owner is root or the agent's
// user, and every user may not write to it unless it has the sticky bit.
// home (the directory of the file, or while it is missing, the closest
// that exists, in which the agent creates a name) also refuses one that
// every user may write to, sticky or not; strict (the directory of the
// file) one that its group may write to, unless that group is root's.
func checkDirOwner(dir string, home, strict bool) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	mode := fi.Mode()
	switch {
	case !trustedUID(st.Uid):
		return fmt.Errorf("directory %s is owned by uid %d (mode %v): %s", dir, st.Uid, mode, privateAdvice)
	case mode&0o002 != 0 && mode&fs.ModeSticky == 0:
		return fmt.Errorf("directory %s is writable by every user (owner uid %d, mode %v): %s", dir, st.Uid, mode, privateAdvice)
	case home && mode&0o002 != 0:
		return fmt.Errorf("directory %s is writable by every user (owner uid %d, mode %v): the sticky bit does not stop another user from creating the path first: %s", dir, st.Uid, mode, privateAdvice)
	case strict && mode&0o020 != 0 && st.Gid != 0:
		return fmt.Errorf("directory %s is writable by group %d (owner uid %d, mode %v): %s", dir, st.Gid, st.Uid, mode, privateAdvice)
	}
	return nil
}

// trustedUID reports whether uid is root's or the agent's.
func trustedUID(uid uint32) bool {
	return uid == 0 || int64(uid) == int64(os.Geteuid())
}
