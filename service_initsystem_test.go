//go:build linux || freebsd || darwin

package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// recorder is a runner that records the command lines it is given, each
// with whether the service file existed then, and fails those in fail.
type recorder struct {
	path  string // the service file
	calls []string
	fail  map[string]error
}

func (r *recorder) run(_ context.Context, name string, args ...string) error {
	line := strings.Join(append([]string{name}, args...), " ")
	if _, err := os.Lstat(r.path); err == nil {
		r.calls = append(r.calls, line+" [file]")
	} else {
		r.calls = append(r.calls, line+" [no file]")
	}
	return r.fail[line]
}

// testInitSystem is an init system for the tests of the install logic.
func testInitSystem() initSystem {
	return initSystem{
		kind:      "test file",
		path:      "/etc/test/plugreg.conf",
		mode:      0o640,
		render:    func(argv []string) ([]byte, error) { return []byte(strings.Join(argv, "\n") + "\n"), nil },
		install:   []command{{args: []string{"reload"}}, {args: []string{"enable", "plugreg"}}},
		uninstall: []command{{args: []string{"stop", "plugreg"}, ignore: "it may not run"}, {args: []string{"disable", "plugreg"}}},
		cleanup:   []command{{args: []string{"reload"}}},
		start:     command{args: []string{"start", "plugreg"}},
		stop:      command{args: []string{"stop", "plugreg"}},
		status:    command{args: []string{"status", "plugreg"}},
	}
}

// testRoot returns a new root directory with the directory of is's file.
func testRoot(t *testing.T, is initSystem) string {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, filepath.Dir(is.path)), 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestInitSystemInstall(t *testing.T) {
	argv := []string{"/usr/local/bin/plugreg", "run", "--dir", "/a b"}
	for _, tc := range []struct {
		name      string
		fail      string // the command that fails
		wantCalls []string
		wantErr   string // "" for none
		wantFile  bool
	}{
		{"ok", "", []string{"reload [file]", "enable plugreg [file]"}, "", true},
		{"first command fails", "reload", []string{"reload [file]"}, "/etc/test/plugreg.conf removed again: reload failed", false},
		{"last command fails", "enable plugreg", []string{"reload [file]", "enable plugreg [file]"}, "/etc/test/plugreg.conf removed again: enable plugreg failed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := testInitSystem()
			root := testRoot(t, is)
			path := filepath.Join(root, is.path)
			r := &recorder{path: path, fail: map[string]error{tc.fail: errors.New(tc.fail + " failed")}}
			err := is.installFile(t.Context(), root, argv, r.run)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr) {
				t.Errorf("installFile() error = %v, want %q", err, tc.wantErr)
			}
			if !slices.Equal(r.calls, tc.wantCalls) {
				t.Errorf("installFile() ran %q, want %q", r.calls, tc.wantCalls)
			}
			b, err := os.ReadFile(path)
			if !tc.wantFile {
				if !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("after a failed install, read %s: %v, want no file", path, err)
				}
				return
			}
			if want := strings.Join(argv, "\n") + "\n"; err != nil || string(b) != want {
				t.Errorf("installFile() wrote %q, %v; want %q", b, err, want)
			}
		})
	}
}

func TestInitSystemInstallTwice(t *testing.T) {
	is := testInitSystem()
	root := testRoot(t, is)
	r := &recorder{path: filepath.Join(root, is.path)}
	if err := is.installFile(t.Context(), root, []string{"/bin/plugreg", "run"}, r.run); err != nil {
		t.Fatal(err)
	}
	r.calls = nil
	err := is.installFile(t.Context(), root, []string{"/bin/plugreg", "run", "--dir", "/x"}, r.run)
	const want = "plugreg is already installed (/etc/test/plugreg.conf exists); run 'plugreg service uninstall' first"
	if err == nil || err.Error() != want {
		t.Errorf("second installFile() error = %v, want %q", err, want)
	}
	if len(r.calls) != 0 {
		t.Errorf("second installFile() ran %q, want nothing", r.calls)
	}
	if b, _ := os.ReadFile(r.path); string(b) != "/bin/plugreg\nrun\n" {
		t.Errorf("second installFile() left %q, want the first file", b)
	}
}

func TestInitSystemUninstall(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fail      string // the command that fails
		wantCalls []string
		wantErr   string // "" for none
		wantWarn  string // "" for none
		wantFile  bool
	}{
		{"ok", "", []string{"stop plugreg [file]", "disable plugreg [file]", "reload [no file]"}, "", "", false},
		{"ignored failure", "stop plugreg", []string{"stop plugreg [file]", "disable plugreg [file]", "reload [no file]"}, "",
			"plugreg: stop plugreg failed (going on: it may not run)\n", false},
		{"failure", "disable plugreg", []string{"stop plugreg [file]", "disable plugreg [file]"}, "disable plugreg failed", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := testInitSystem()
			root := testRoot(t, is)
			path := filepath.Join(root, is.path)
			if err := os.WriteFile(path, []byte("x"), 0o640); err != nil {
				t.Fatal(err)
			}
			r := &recorder{path: path, fail: map[string]error{tc.fail: errors.New(tc.fail + " failed")}}
			var warn strings.Builder
			err := is.uninstallFile(t.Context(), root, r.run, &warn)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr) {
				t.Errorf("uninstallFile() error = %v, want %q", err, tc.wantErr)
			}
			if !slices.Equal(r.calls, tc.wantCalls) {
				t.Errorf("uninstallFile() ran %q, want %q", r.calls, tc.wantCalls)
			}
			if warn.String() != tc.wantWarn {
				t.Errorf("uninstallFile() warned %q, want %q", warn.String(), tc.wantWarn)
			}
			if _, err := os.Lstat(path); (err == nil) != tc.wantFile {
				t.Errorf("after uninstallFile(), stat %s: %v; want the file: %v", path, err, tc.wantFile)
			}
		})
	}
}

// TestInitSystemNotInstalled checks that uninstall, start, stop and status
// of a service that is not installed run nothing and say so.
func TestInitSystemNotInstalled(t *testing.T) {
	is := testInitSystem()
	const want = "plugreg is not installed (no /etc/test/plugreg.conf); run 'plugreg service install' first"
	for _, tc := range []struct {
		name string
		do   func(root string, run runner) error
	}{
		{"uninstall", func(root string, run runner) error { return is.uninstallFile(t.Context(), root, run, nil) }},
		{"start", func(root string, run runner) error { return is.control(t.Context(), root, is.start, run) }},
		{"stop", func(root string, run runner) error { return is.control(t.Context(), root, is.stop, run) }},
		{"status", func(root string, run runner) error { return is.control(t.Context(), root, is.status, run) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := testRoot(t, is)
			r := &recorder{path: filepath.Join(root, is.path)}
			if err := tc.do(root, r.run); err == nil || err.Error() != want {
				t.Errorf("%s error = %v, want %q", tc.name, err, want)
			}
			if len(r.calls) != 0 {
				t.Errorf("%s ran %q, want nothing", tc.name, r.calls)
			}
		})
	}
}

func TestInitSystemControl(t *testing.T) {
	is := testInitSystem()
	root := testRoot(t, is)
	path := filepath.Join(root, is.path)
	if err := os.WriteFile(path, []byte("x"), 0o640); err != nil {
		t.Fatal(err)
	}
	r := &recorder{path: path, fail: map[string]error{"status plugreg": errors.New("exit status 3")}}
	for _, c := range []command{is.start, is.stop} {
		if err := is.control(t.Context(), root, c, r.run); err != nil {
			t.Errorf("control(%s) error = %v", c, err)
		}
	}
	if err := is.control(t.Context(), root, is.status, r.run); err == nil || err.Error() != "exit status 3" {
		t.Errorf("control(%s) error = %v, want the command's", is.status, err)
	}
	if want := []string{"start plugreg [file]", "stop plugreg [file]", "status plugreg [file]"}; !slices.Equal(r.calls, want) {
		t.Errorf("control ran %q, want %q", r.calls, want)
	}
}

// testWiring installs and uninstalls is, an OS's init system, under a
// temporary root with a recording runner, and checks the file, its mode and
// the commands, which are given with [file] or [no file].
func testWiring(t *testing.T, is initSystem, wantPath string, wantMode fs.FileMode, wantInstall, wantUninstall []string) {
	t.Helper()
	if is.path != wantPath {
		t.Errorf("path %s, want %s", is.path, wantPath)
	}
	root := testRoot(t, is)
	path := filepath.Join(root, wantPath)
	argv := []string{"/usr/local/bin/plugreg", "run", "--dir", "/var/lib/plug ins"}
	r := &recorder{path: path}
	if err := is.installFile(t.Context(), root, argv, r.run); err != nil {
		t.Fatalf("installFile() error = %v", err)
	}
	if !slices.Equal(r.calls, wantInstall) {
		t.Errorf("installFile() ran %q, want %q", r.calls, wantInstall)
	}
	want, err := is.render(argv)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != string(want) {
		t.Errorf("installFile() wrote %q, %v; want %q", b, err, want)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode() != wantMode {
		t.Errorf("stat %s: %v, %v; want mode %v", path, fi.Mode(), err, wantMode)
	}
	if err := is.installFile(t.Context(), root, argv, r.run); err == nil || !strings.Contains(err.Error(), "already installed") {
		t.Errorf("second installFile() error = %v, want already installed", err)
	}
	r.calls = nil
	if err := is.uninstallFile(t.Context(), root, r.run, t.Output()); err != nil {
		t.Fatalf("uninstallFile() error = %v", err)
	}
	if !slices.Equal(r.calls, wantUninstall) {
		t.Errorf("uninstallFile() ran %q, want %q", r.calls, wantUninstall)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after uninstallFile(), stat %s: %v; want no file", path, err)
	}
	if err := is.uninstallFile(t.Context(), root, r.run, t.Output()); err == nil || !strings.Contains(err.Error(), "not installed") {
		t.Errorf("second uninstallFile() error = %v, want not installed", err)
	}
}
