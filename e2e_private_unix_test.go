//go:build unix

package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
)

// TestRunRefusesSharedDirs runs the agent with its state file or API
// socket in a directory that another user could write to: it exits with
// status 1, names the directory, and creates nothing.
func TestRunRefusesSharedDirs(t *testing.T) {
	sockettest.NeedRoot(t, "to give a directory to another user")
	plugregBin(t) // skips in -short mode
	for _, tc := range []struct {
		name        string
		mode        os.FileMode
		uid         int
		stateIn     bool // the state file is in the shared directory, else the API socket
		wantFlag    string
		wantProblem string
	}{
		{"state in a directory of uid 65534", 0o755, 65534, true, "state file", "is owned by uid 65534 (mode drwxr-xr-x)"},
		{"api in a directory writable by everyone", 0o777, 0, false, "api socket", "is writable by every user (owner uid 0, mode drwxrwxrwx)"},
		{"state in a sticky directory writable by everyone", 0o777 | os.ModeSticky, 0, true, "state file", "is writable by every user (owner uid 0, mode dtrwxrwxrwx): the sticky bit does not stop another user from creating the path first"},
		{"api in a sticky directory writable by everyone", 0o777 | os.ModeSticky, 0, false, "api socket", "is writable by every user (owner uid 0, mode dtrwxrwxrwx): the sticky bit does not stop another user from creating the path first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp, err := filepath.EvalSymlinks(sockettest.Dir(t))
			if err != nil {
				t.Fatal(err)
			}
			shared := filepath.Join(tmp, "shared")
			if err := os.Mkdir(shared, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(shared, tc.uid, tc.uid); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(shared, tc.mode); err != nil {
				t.Fatal(err)
			}
			state, api := filepath.Join(tmp, "state.json"), filepath.Join(tmp, "api.sock")
			file := &api
			if tc.stateIn {
				file = &state
			}
			*file = filepath.Join(shared, filepath.Base(*file))
			plugins := filepath.Join(tmp, "plugins")
			_, stderr, code := plugreg(t, "run", "--dir", plugins, "--api", api, "--state", state)
			want := "plugreg: refusing to start: " + tc.wantFlag + " " + *file + ": directory " + shared + " " + tc.wantProblem +
				": make it owned by root and not writable by other users\n"
			if code != 1 || stderr != want {
				t.Errorf("plugreg run --api %s --state %s = exit %d, stderr %q; want exit 1, stderr %q", api, state, code, stderr, want)
			}
			for _, p := range []string{plugins, api, state} {
				if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("refused agent created %s (%v)", p, err)
				}
			}
			if strings.Contains(stderr, "agent started") {
				t.Errorf("refused agent started: %s", stderr)
			}
		})
	}
}
