//go:build !windows

package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// skipWithoutServiceCommand skips t where plugreg knows no init system.
func skipWithoutServiceCommand(t *testing.T) {
	t.Helper()
	if _, err := hostInitSystem(); err != nil {
		t.Skip(err)
	}
}

// TestInitSystemFor checks which init system `plugreg service` uses on
// each OS, and the usage error where it knows none.
func TestInitSystemFor(t *testing.T) {
	for _, tc := range []struct {
		goos, want string // want is the kind of file, or the error
	}{
		{"linux", "systemd unit"},
		{"freebsd", "rc.d script"},
		{"darwin", "launchd plist"},
		{"openbsd", "service: not supported on openbsd; run 'plugreg run [flags]' from the init system instead"},
		{"netbsd", "service: not supported on netbsd; run 'plugreg run [flags]' from the init system instead"},
		{"dragonfly", "service: not supported on dragonfly; run 'plugreg run [flags]' from the init system instead"},
		{"illumos", "service: not supported on illumos; run 'plugreg run [flags]' from the init system instead"},
	} {
		is, err := initSystemFor(tc.goos)
		var ue *usageError
		switch {
		case err != nil && (err.Error() != tc.want || !errors.As(err, &ue)):
			t.Errorf("initSystemFor(%q) error = %v, want the usage error %q", tc.goos, err, tc.want)
		case err == nil && is.kind != tc.want:
			t.Errorf("initSystemFor(%q) = %s, want %s", tc.goos, is.kind, tc.want)
		}
	}
}

// TestServicePrint runs `plugreg service print` for each init system: in
// process as main would for this OS's, and through runInitService for the
// others.
func TestServicePrint(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		goos   string
		args   []string
		prefix string   // of stdout
		want   []string // in stdout
	}{
		{"linux", []string{"service", "print", "--dir", "/var/lib/plug ins", "--interval=2s"}, "",
			[]string{"\nExecStart=" + systemdQuote(exe) + ` run --dir "/var/lib/plug ins" --interval=2s` + "\n", "\n[Service]\n"}},
		{"freebsd", []string{"service", "print", "--dir", "/var/lib/plug ins"}, "#!/bin/sh\n",
			[]string{" " + shQuote(exe) + ` run --dir '/var/lib/plug ins' ${plugreg_args}"` + "\n"}},
		{"darwin", []string{"service", "print", "--dir", "/a&b"}, "",
			[]string{"\t\t<string>" + plistEscape(exe) + "</string>\n\t\t<string>run</string>\n\t\t<string>--dir</string>\n\t\t<string>/a&amp;b</string>\n"}},
	} {
		t.Run(tc.goos, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			var err error
			if tc.goos == runtime.GOOS {
				err = run(t.Context(), tc.args, &stdout, &stderr)
			} else {
				is, isErr := initSystemFor(tc.goos)
				if isErr != nil {
					t.Fatal(isErr)
				}
				err = runInitService(t.Context(), is, tc.args[1:], &stdout, &stderr)
			}
			code := exitCode(err, &stderr)
			ok := code == 0 && stderr.Len() == 0 && strings.HasPrefix(stdout.String(), tc.prefix)
			for _, w := range tc.want {
				ok = ok && strings.Contains(stdout.String(), w)
			}
			if !ok {
				t.Errorf("plugreg %q: exit %d, stderr %q, stdout:\n%s\nwant exit 0 and a file starting with %q holding %q", tc.args, code, stderr.String(), stdout.String(), tc.prefix, tc.want)
			}
		})
	}
}

// TestServiceUnsupported runs `plugreg service` in-process, as main would,
// on an OS where plugreg knows no init system.
func TestServiceUnsupported(t *testing.T) {
	if is, err := hostInitSystem(); err == nil {
		t.Skipf("plugreg service uses the %s on %s", is.kind, runtime.GOOS)
	}
	want := "plugreg: service: not supported on " + runtime.GOOS + "; run 'plugreg run [flags]' from the init system instead"
	for _, args := range [][]string{{"service"}, {"service", "-h"}, {"service", "install", "--dir", "/p"}, {"service", "print"}, {"service", "stop"}} {
		var stdout, stderr bytes.Buffer
		code := exitCode(run(t.Context(), args, &stdout, &stderr), &stderr)
		if code != 2 || !strings.Contains(stderr.String(), want) {
			t.Errorf("plugreg %q: exit %d, stderr %q; want exit 2 with %q", args, code, stderr.String(), want)
		}
	}
}

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

// TestInitSystems checks the file and the commands of each init system.
func TestInitSystems(t *testing.T) {
	const plist = "/Library/LaunchDaemons/com.github.plugreg.plist"
	for _, tc := range []struct {
		name                string
		is                  initSystem
		path                string
		mode                fs.FileMode
		install, uninstall  []string // the commands run, with whether the file exists then
		start, stop, status string
	}{
		{
			"systemd", systemd(), "/etc/systemd/system/plugreg.service", 0o644,
			[]string{"systemctl daemon-reload [file]", "systemctl enable plugreg.service [file]"},
			[]string{"systemctl disable --now plugreg.service [file]", "systemctl daemon-reload [no file]"},
			"systemctl start plugreg.service", "systemctl stop plugreg.service", "systemctl status --no-pager plugreg.service",
		},
		{
			"rc.d", rcd(), "/usr/local/etc/rc.d/plugreg", 0o555,
			[]string{"sysrc plugreg_enable=YES [file]"},
			[]string{"service plugreg onestop [file]", "sysrc -x plugreg_enable [no file]"},
			"service plugreg start", "service plugreg stop", "service plugreg status",
		},
		{
			"launchd", launchd(), plist, 0o644,
			[]string{"launchctl bootstrap system " + plist + " [file]"},
			[]string{"launchctl bootout system/com.github.plugreg [file]"},
			"launchctl kickstart system/com.github.plugreg", "launchctl kill SIGTERM system/com.github.plugreg", "launchctl print system/com.github.plugreg",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testWiring(t, tc.is, tc.path, tc.mode, tc.install, tc.uninstall)
			for _, c := range []struct {
				c    command
				want string
			}{{tc.is.start, tc.start}, {tc.is.stop, tc.stop}, {tc.is.status, tc.status}} {
				if c.c.String() != c.want {
					t.Errorf("command %s, want %s", c.c, c.want)
				}
			}
		})
	}
}

// hostileArgs are flag values that every service file must carry through
// unchanged.
var hostileArgs = []string{
	"--dir", "/var/lib/plug ins",
	"--dir=/srv/it's",
	`--dir=/srv/say "hi"`,
	"--dir", "/srv/100%/%n%%",
	"--dir", "/srv/$HOME/${HOME}/$$/$",
	"--dir", "/srv/a&b<c>d]]>",
	"--dir", `C:\back\slash\`,
	"--dir", "/srv/`id`/$(id)",
	"--dir", ";", "--dir", "#c", "--dir", "*", "--dir", "~", "--dir", "",
	"--dir", "'", "--dir", `"`, "--dir", `\`,
	"--dir", "/srv/été/日本",
}

// badWords are words that no service file can carry, and each render
// function must refuse.
var badWords = []string{"a\nb", "a\rb", "a\tb", "a\x00b", "a\x7fb", "a\u0085b", "a\xffb", "a\uFFFEb"}

// testArgv is a command line that runs a real executable, the test binary,
// as systemd-analyze verify wants.
func testArgv(t *testing.T, runArgs ...string) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{exe, "run"}, runArgs...)
}

func TestSystemdUnit(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv []string
	}{
		{"no flags", []string{"/usr/local/bin/plugreg", "run"}},
		{"plain flags", []string{"/usr/local/bin/plugreg", "run", "--dir", "/var/lib/kubelet/plugins_registry", "--interval=1s"}},
		{"hostile flags", append([]string{"/opt/plug reg/100%/plugreg", "run"}, hostileArgs...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := systemdUnit(tc.argv)
			if err != nil {
				t.Fatalf("systemdUnit(%q) error = %v", tc.argv, err)
			}
			line := unitValue(t, string(b), "ExecStart")
			got, err := parseExecStart(line)
			if err != nil {
				t.Fatalf("ExecStart=%s: %v", line, err)
			}
			if !slices.Equal(got, tc.argv) {
				t.Errorf("ExecStart=%s runs %q, want %q", line, got, tc.argv)
			}
			for _, want := range []string{"Restart=on-failure\n", "RestartSec=5s\n", "RuntimeDirectory=plugreg\n", "StateDirectory=plugreg\n", "WantedBy=multi-user.target\n"} {
				if !strings.Contains(string(b), want) {
					t.Errorf("systemdUnit(%q) has no line %q", tc.argv, want)
				}
			}
		})
	}
}

func TestSystemdQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"run", "run"},
		{"--dir=/var/lib/x", "--dir=/var/lib/x"},
		{"100%", "100%%"},
		{"$HOME", "$$HOME"},
		{"a b", `"a b"`},
		{`say "hi"`, `"say \"hi\""`},
		{`a\b`, `"a\\b"`},
		{"it's", `"it's"`},
		{"a b%$", `"a b%%$$"`},
		{"", `""`},
		{";", `";"`},
	} {
		if got := systemdQuote(tc.in); got != tc.want {
			t.Errorf("systemdQuote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestSystemdAnalyzeVerify has systemd check units with hostile flags.
func TestSystemdAnalyzeVerify(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze on PATH")
	}
	for _, tc := range []struct {
		name string
		argv []string
	}{
		{"no flags", testArgv(t)},
		{"hostile flags", testArgv(t, hostileArgs...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := systemdUnit(tc.argv)
			if err != nil {
				t.Fatalf("systemdUnit(%q) error = %v", tc.argv, err)
			}
			path := filepath.Join(t.TempDir(), "plugreg.service")
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.CommandContext(t.Context(), sa, "verify", path).CombinedOutput()
			if err != nil || strings.Contains(string(out), "plugreg.service") {
				t.Errorf("systemd-analyze verify: %v, output:\n%s\nunit:\n%s", err, out, b)
			}
		})
	}
}

// unitValue returns the value of the one line key= of a unit.
func unitValue(t *testing.T, unit, key string) string {
	t.Helper()
	var vals []string
	for l := range strings.Lines(unit) {
		if v, ok := strings.CutPrefix(l, key+"="); ok {
			vals = append(vals, strings.TrimSuffix(v, "\n"))
		}
	}
	if len(vals) != 1 {
		t.Fatalf("unit has %d lines %s=, want 1:\n%s", len(vals), key, unit)
	}
	return vals[0]
}

// parseExecStart splits a command line of a systemd unit into the words
// systemd runs, as systemd.service(5) and systemd.syntax(7) say: "%%" is
// "%", other specifiers are errors; words are split at spaces, with double
// quotes in which "\\" and "\"" are escapes; then "$$" is "$" and a
// variable is an error.
func parseExecStart(s string) ([]string, error) {
	if strings.ReplaceAll(s, "%%", "") != strings.ReplaceAll(strings.ReplaceAll(s, "%%", ""), "%", "") {
		return nil, fmt.Errorf("specifier in %q", s)
	}
	s = strings.ReplaceAll(s, "%%", "%")
	var words []string
	for i := 0; ; {
		for i < len(s) && s[i] == ' ' {
			i++
		}
		if i == len(s) {
			return words, nil
		}
		var w strings.Builder
		if s[i] == '"' {
			for i++; ; i++ {
				if i == len(s) {
					return nil, errors.New("unbalanced quotes")
				}
				if s[i] == '"' {
					i++
					break
				}
				if s[i] == '\\' {
					i++
					if i == len(s) || (s[i] != '\\' && s[i] != '"') {
						return nil, fmt.Errorf("unknown escape at %d", i)
					}
				}
				w.WriteByte(s[i])
			}
			if i < len(s) && s[i] != ' ' {
				return nil, fmt.Errorf("text after the quotes at %d", i)
			}
		} else {
			for ; i < len(s) && s[i] != ' '; i++ {
				if strings.IndexByte(`\"'`, s[i]) >= 0 {
					return nil, fmt.Errorf("unquoted %q at %d", s[i], i)
				}
				w.WriteByte(s[i])
			}
		}
		word := w.String()
		if strings.Contains(strings.ReplaceAll(word, "$$", ""), "$") {
			return nil, fmt.Errorf("variable in %q", word)
		}
		words = append(words, strings.ReplaceAll(word, "$$", "$"))
	}
}

// rcDaemonArgs are the flags the rc.d script gives daemon(8) before the
// command line of plugreg.
var rcDaemonArgs = []string{"/usr/sbin/daemon", "-r", "-R", "5", "-P", "/var/run/plugreg.pid", "-t", "plugreg", "-S", "-T", "plugreg"}

// TestRCScript checks the rc.d script with sh -n, then runs it with an
// rc.subr that prints the command run_rc_command would start: rc.subr runs
// eval on "$command $rc_flags $command_args".
func TestRCScript(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on PATH")
	}
	const fakeRCSubr = `load_rc_config() { :; }
run_rc_command() { eval "set -- $command $rc_flags $command_args"; printf '%s\0' "$@"; }
`
	for _, tc := range []struct {
		name        string
		argv        []string
		plugregArgs string // plugreg_args, as in rc.conf
		want        []string
	}{
		{"no flags", []string{"/usr/local/bin/plugreg", "run"}, "", nil},
		{"hostile flags", append([]string{"/opt/plug reg/it's/plugreg", "run"}, hostileArgs...), "", nil},
		{"plugreg_args", []string{"/usr/local/bin/plugreg", "run", "--dir", "/a b"}, `--interval 2s --dir '/c d'`, []string{"--interval", "2s", "--dir", "/c d"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := rcScript(tc.argv)
			if err != nil {
				t.Fatalf("rcScript(%q) error = %v", tc.argv, err)
			}
			dir := t.TempDir()
			path := filepath.Join(dir, "plugreg")
			if err := os.WriteFile(path, b, 0o755); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.CommandContext(t.Context(), sh, "-n", path).CombinedOutput(); err != nil {
				t.Fatalf("sh -n: %v\n%s\nscript:\n%s", err, out, b)
			}
			const source = "\n. /etc/rc.subr\n"
			if strings.Count(string(b), source) != 1 {
				t.Fatalf("the script does not source /etc/rc.subr once:\n%s", b)
			}
			fake := filepath.Join(dir, "rc.subr")
			if err := os.WriteFile(fake, []byte(fakeRCSubr), 0o644); err != nil {
				t.Fatal(err)
			}
			script := strings.Replace(string(b), source, "\n. "+shQuote(fake)+"\n", 1)
			script = strings.Replace(script, "load_rc_config $name\n", "load_rc_config $name\nplugreg_args="+shQuote(tc.plugregArgs)+"\n", 1)
			cmd := exec.CommandContext(t.Context(), sh, "-s", "start")
			cmd.Stdin = strings.NewReader(script)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("sh: %v\n%s\nscript:\n%s", err, stderr.Bytes(), b)
			}
			got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
			want := slices.Concat(rcDaemonArgs, tc.argv, tc.want)
			if !slices.Equal(got, want) {
				t.Errorf("the script runs %q, want %q\nscript:\n%s", got, want, b)
			}
		})
	}
}

func TestShQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"run", "run"},
		{"--dir=/var/lib/x", "--dir=/var/lib/x"},
		{"a b", "'a b'"},
		{"it's", `'it'\''s'`},
		{"$HOME", "'$HOME'"},
		{"", "''"},
		{"~", "'~'"},
	} {
		if got := shQuote(tc.in); got != tc.want {
			t.Errorf("shQuote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// plistDict is the top-level dict of a property list, with the values
// plugreg writes: strings, arrays of strings, booleans and dicts of them.
type plistDict map[string]any

// parsePlist parses a property list with encoding/xml.
func parsePlist(b []byte) (plistDict, error) {
	d := xml.NewDecoder(bytes.NewReader(b))
	root, err := nextStart(d)
	if err != nil {
		return nil, err
	}
	if root.Name.Local != "plist" {
		return nil, fmt.Errorf("root element %s, want plist", root.Name.Local)
	}
	v, err := plistValue(d, nil)
	if err != nil {
		return nil, err
	}
	dict, ok := v.(plistDict)
	if !ok {
		return nil, fmt.Errorf("plist holds %T, want a dict", v)
	}
	return dict, nil
}

// nextStart returns the next start element in d.
func nextStart(d *xml.Decoder) (*xml.StartElement, error) {
	for {
		tok, err := d.Token()
		if err != nil {
			return nil, err
		}
		if se, ok := tok.(xml.StartElement); ok {
			return &se, nil
		}
	}
}

// plistChildren calls f with each child element of the element d is in,
// up to its end.
func plistChildren(d *xml.Decoder, f func(*xml.StartElement) error) error {
	for {
		tok, err := d.Token()
		if err != nil {
			return err
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if err := f(&tok); err != nil {
				return err
			}
		case xml.EndElement:
			return nil
		}
	}
}

// plistValue decodes the next value in d; start is its start element, if
// already read.
func plistValue(d *xml.Decoder, start *xml.StartElement) (any, error) {
	if start == nil {
		var err error
		if start, err = nextStart(d); err != nil {
			return nil, err
		}
	}
	switch start.Name.Local {
	case "string", "key":
		var s string
		err := d.DecodeElement(&s, start)
		return s, err
	case "true", "false":
		err := d.Skip()
		return start.Name.Local == "true", err
	case "array":
		a := []string{}
		err := plistChildren(d, func(se *xml.StartElement) error {
			v, err := plistValue(d, se)
			if err != nil {
				return err
			}
			s, ok := v.(string)
			if !ok {
				return fmt.Errorf("array holds %T", v)
			}
			a = append(a, s)
			return nil
		})
		return a, err
	case "dict":
		m := plistDict{}
		err := plistChildren(d, func(se *xml.StartElement) error {
			k, err := plistValue(d, se)
			if err != nil {
				return err
			}
			key, ok := k.(string)
			if !ok || se.Name.Local != "key" {
				return fmt.Errorf("dict has %s where a key belongs", se.Name.Local)
			}
			m[key], err = plistValue(d, nil)
			return err
		})
		return m, err
	default:
		return nil, fmt.Errorf("unexpected element %s", start.Name.Local)
	}
}

func TestLaunchdPlist(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv []string
	}{
		{"no flags", []string{"/usr/local/bin/plugreg", "run"}},
		{"hostile flags", append([]string{"/Applications/plug & reg/<plugreg>", "run"}, hostileArgs...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := launchdPlist(tc.argv)
			if err != nil {
				t.Fatalf("launchdPlist(%q) error = %v", tc.argv, err)
			}
			got, err := parsePlist(b)
			if err != nil {
				t.Fatalf("parse: %v\n%s", err, b)
			}
			want := plistDict{
				"Label":             launchdLabel,
				"ProgramArguments":  tc.argv,
				"RunAtLoad":         true,
				"KeepAlive":         plistDict{"SuccessfulExit": false},
				"StandardOutPath":   "/var/log/plugreg.log",
				"StandardErrorPath": "/var/log/plugreg.log",
			}
			if fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", want) {
				t.Errorf("launchdPlist(%q) reads back as\n%#v\nwant\n%#v", tc.argv, got, want)
			}
		})
	}
}

func TestPlistEscape(t *testing.T) {
	const in, want = `a&b<c>d"e'f`, `a&amp;b&lt;c&gt;d"e'f`
	if got := plistEscape(in); got != want {
		t.Errorf("plistEscape(%q) = %q, want %q", in, got, want)
	}
}

// TestServiceFilesRefuse checks that every format refuses what it cannot
// carry.
func TestServiceFilesRefuse(t *testing.T) {
	renders := []struct {
		name   string
		render func([]string) ([]byte, error)
	}{{"systemdUnit", systemdUnit}, {"rcScript", rcScript}, {"launchdPlist", launchdPlist}}
	for _, r := range renders {
		if _, err := r.render(nil); err == nil {
			t.Errorf("%s(nil) error = nil, want an error", r.name)
		}
		for _, w := range badWords {
			for _, argv := range [][]string{{"/usr/local/bin/plugreg", "run", "--dir", w}, {"/opt/" + w + "/plugreg", "run"}} {
				if b, err := r.render(argv); err == nil {
					t.Errorf("%s(%q) error = nil, want an error; wrote:\n%s", r.name, argv, b)
				}
			}
		}
	}
	argv := []string{"/opt/$x/plugreg", "run"}
	if _, err := systemdUnit(argv); err == nil || !strings.Contains(err.Error(), "'$'") {
		t.Errorf("systemdUnit(%q) error = %v, want one about '$'", argv, err)
	}
}
