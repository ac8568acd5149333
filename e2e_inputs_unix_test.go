//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
)

// otherUID owns the files that another user could replace in
// TestRunChecksInputs: any uid but root's and the agent's.
const otherUID = 1001

// TestRunChecksInputs: the agent refuses to start when another user could
// replace a handler's program, the directory of a handler's socket, or the
// etcd password file, naming the path, its owner and its mode; it starts
// with the same inputs owned by root.
func TestRunChecksInputs(t *testing.T) {
	sockettest.NeedRoot(t, "to give files to another user")
	plugregBin(t) // skips in -short mode
	for _, tc := range []struct {
		name string
		// setup makes the inputs in tmp and returns the extra flags of run
		// and, for a refusal, the end of the message after "refusing to
		// start: " ("": the agent starts).
		setup func(t *testing.T, tmp string) (args []string, want string)
	}{
		{"trusted handlers", func(t *testing.T, tmp string) ([]string, string) {
			prog := program(t, tmp+"/handler.sh", 0, 0o755)
			return []string{"--handler", "CSIPlugin=exec:" + prog, "--handler", "DevicePlugin=grpc:" + tmp + "/handler.sock"}, ""
		}},
		{"trusted password file", func(t *testing.T, tmp string) ([]string, string) {
			// Accepted and read: the agent starts and serves while the
			// etcd at a loopback address is not there.
			pw := program(t, tmp+"/password", 0, 0o600)
			return []string{"--publish", "127.0.0.1:1", "--etcd-user", "u", "--etcd-password-file", pw}, ""
		}},
		{"program of another user", func(t *testing.T, tmp string) ([]string, string) {
			prog := program(t, tmp+"/handler.sh", otherUID, 0o755)
			return []string{"--handler", "CSIPlugin=exec:" + prog},
				"handler program of CSIPlugin " + prog + ": " + prog + " is owned by uid 1001 (mode -rwxr-xr-x): remove it, or make it owned by root"
		}},
		{"program writable by every user", func(t *testing.T, tmp string) ([]string, string) {
			prog := program(t, tmp+"/handler.sh", 0, 0o777)
			return []string{"--handler", "CSIPlugin=exec:" + prog},
				"handler program of CSIPlugin " + prog + ": " + prog + " is writable by every user (owner uid 0, mode -rwxrwxrwx): make it writable by its owner only (chmod go-w)"
		}},
		{"program in a directory of another user", func(t *testing.T, tmp string) ([]string, string) {
			dir := ownedDir(t, tmp+"/bin", otherUID, 0o755)
			prog := program(t, dir+"/handler.sh", 0, 0o755)
			return []string{"--handler", "CSIPlugin=exec:" + prog},
				"handler program of CSIPlugin " + prog + ": directory " + dir + " is owned by uid 1001 (mode drwxr-xr-x): make it owned by root and not writable by other users"
		}},
		{"socket in a sticky directory", func(t *testing.T, tmp string) ([]string, string) {
			dir := ownedDir(t, tmp+"/run", 0, 0o777|os.ModeSticky)
			sock := dir + "/handler.sock"
			return []string{"--handler", "DevicePlugin=grpc:" + sock},
				"handler socket of DevicePlugin " + sock + ": directory " + dir + " is writable by every user (owner uid 0, mode dtrwxrwxrwx): the sticky bit does not stop another user from creating the path first: make it owned by root and not writable by other users"
		}},
		{"password file of another user", func(t *testing.T, tmp string) ([]string, string) {
			pw := program(t, tmp+"/password", otherUID, 0o600)
			return []string{"--publish", "127.0.0.1:1", "--etcd-user", "u", "--etcd-password-file", pw},
				"etcd password file " + pw + ": " + pw + " is owned by uid 1001 (mode -rw-------): remove it, or make it owned by root"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tmp, err := filepath.EvalSymlinks(sockettest.Dir(t))
			if err != nil {
				t.Fatal(err)
			}
			extra, want := tc.setup(t, tmp)
			e := agentEnv{tmp: tmp, dir: tmp + "/plugins", api: tmp + "/api.sock", state: tmp + "/state.json"}
			if want == "" {
				agent := e.run(t, extra...)
				if code, _ := agent.stop(t); code != 0 {
					t.Errorf("agent exit %d after SIGTERM, want 0:\n%s", code, agent.out)
				}
				return
			}
			out, stderr, code := plugreg(t, e.runArgs(extra...)...)
			if want = "plugreg: refusing to start: " + want + "\n"; code != 1 || out != "" || stderr != want {
				t.Errorf("plugreg %s = exit %d, stdout %q, stderr %q; want exit 1, stderr %q", strings.Join(e.runArgs(extra...), " "), code, out, stderr, want)
			}
			if _, err := os.Lstat(e.api); err == nil {
				t.Errorf("the refused agent created its API socket")
			}
		})
	}
}

// TestRunChecksInputModes: whoever runs the agent, it refuses to start
// when every user may write to a handler's program or to the etcd password
// file, naming the path, its owner and its mode. It runs as any uid, on
// files of its own.
func TestRunChecksInputModes(t *testing.T) {
	plugregBin(t) // skips in -short mode
	uid := strconv.Itoa(os.Geteuid())
	for _, tc := range []struct {
		name  string
		flags func(path string) []string
		want  string // after the path
	}{
		{"program writable by every user", func(prog string) []string { return []string{"--handler", "CSIPlugin=exec:" + prog} },
			"handler program of CSIPlugin PATH: PATH is writable by every user (owner uid " + uid + ", mode -rwxrwxrwx): make it writable by its owner only (chmod go-w)"},
		{"password file writable by every user", func(pw string) []string {
			return []string{"--publish", "127.0.0.1:1", "--etcd-user", "u", "--etcd-password-file", pw}
		}, "etcd password file PATH: PATH is writable by every user (owner uid " + uid + ", mode -rwxrwxrwx): make it writable by its owner only (chmod go-w)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tmp, err := filepath.EvalSymlinks(sockettest.Dir(t))
			if err != nil {
				t.Fatal(err)
			}
			path := program(t, tmp+"/input", os.Geteuid(), 0o777)
			e := agentEnv{tmp: tmp, dir: tmp + "/plugins", api: tmp + "/api.sock", state: tmp + "/state.json"}
			args := e.runArgs(tc.flags(path)...)
			out, stderr, code := plugreg(t, args...)
			if want := "plugreg: refusing to start: " + strings.ReplaceAll(tc.want, "PATH", path) + "\n"; code != 1 || out != "" || stderr != want {
				t.Errorf("plugreg %s = exit %d, stdout %q, stderr %q; want exit 1, stderr %q", strings.Join(args, " "), code, out, stderr, want)
			}
		})
	}
}

// program writes a shell script at path that exits 0, owned by uid (its
// group left as created) and with mode, whatever the umask.
func program(t *testing.T, path string, uid int, mode os.FileMode) string {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\nexit 0\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, -1); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

// ownedDir makes the directory dir owned by uid, with mode, whatever the
// umask.
func ownedDir(t *testing.T, dir string, uid int, mode os.FileMode) string {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}
