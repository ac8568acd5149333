package sockettest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The environment of the access tests: tests of a rule about who may do
// what (a file another user could replace, a socket or a caller of another
// uid) that need what the machine may not give, root above all.
const (
	// AccessSkipsEnv names a file to which SkipAccess appends a line for
	// each access test it skips, "PACKAGE TEST: why": `make test` lists
	// them when it ends, so that a run as another user says what it did
	// not prove.
	AccessSkipsEnv = "PLUGREG_ACCESS_SKIPS"
	// AccessRequiredEnv set to 1 makes SkipAccess fail the test instead:
	// .ci/run, which runs as root, sets it, so that no access rule goes
	// untested there.
	AccessRequiredEnv = "PLUGREG_ACCESS_REQUIRED"
)

// NeedRoot skips tb, a test of an access rule, with SkipAccess unless it
// runs as root; why says what root is needed for ("to give a file to
// another user"). On an OS without uids (Windows) it skips plainly: there
// is no rule of uids to test there.
func NeedRoot(tb testing.TB, why string) {
	tb.Helper()
	switch os.Geteuid() {
	case 0:
	case -1: // Windows: no uids, so no rule of theirs to test
		tb.Skipf("no uids on this OS: the test needs root %s", why)
	default:
		SkipAccess(tb, "needs root %s", why)
	}
}

// SkipAccess skips tb, a test of an access rule that cannot run here, and
// says why (a format and its arguments, as fmt.Sprintf's). The skip is
// recorded in the file AccessSkipsEnv names, if set; with AccessRequiredEnv
// set to 1, tb fails instead.
func SkipAccess(tb testing.TB, format string, args ...any) {
	tb.Helper()
	why := fmt.Sprintf(format, args...)
	if os.Getenv(AccessRequiredEnv) == "1" {
		tb.Fatalf("access rule not tested: %s (%s=1 requires it)", why, AccessRequiredEnv)
	}
	if path := os.Getenv(AccessSkipsEnv); path != "" {
		if err := appendLine(path, packageDir()+" "+tb.Name()+": "+why); err != nil {
			tb.Errorf("record the skip: %v", err)
		}
	}
	tb.Skip("access rule not tested: " + why)
}

// appendLine appends line and a newline to the file at path, in one
// write, so that the lines of test processes running at once do not mix.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// packageDir returns the directory of the package under test, which go
// test runs it in, relative to the module's root ("./plugins"; "." for the
// root package), or the directory itself outside a module.
func packageDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "?"
	}
	for root := wd; ; root = filepath.Dir(root) {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			rel, err := filepath.Rel(root, wd)
			if err != nil {
				return wd
			}
			if rel == "." {
				return "."
			}
			return "./" + filepath.ToSlash(rel)
		}
		if filepath.Dir(root) == root {
			return wd
		}
	}
}
