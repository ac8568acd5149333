package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
)

// The argument handling of `plugreg service` runs before any call to a
// service manager, so it is tested without one (and, on Windows, under
// wine).

func TestParseServiceArgs(t *testing.T) {
	abs, err := filepath.Abs(filepath.Join("a b", "$x%y")) // absolute on every OS
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		args    []string
		want    serviceArgs
		wantErr string // in the usage error; "" for none
	}{
		{"install", []string{"install"}, serviceArgs{action: "install", runArgs: []string{}}, ""},
		{"install with run flags", []string{"install", "--dir", abs, "--interval=2s"},
			serviceArgs{action: "install", runArgs: []string{"--dir", abs, "--interval=2s"}}, ""},
		{"print with run flags", []string{"print", "--dir", abs},
			serviceArgs{action: "print", runArgs: []string{"--dir", abs}}, ""},
		{"uninstall", []string{"uninstall"}, serviceArgs{action: "uninstall"}, ""},
		{"start", []string{"start"}, serviceArgs{action: "start"}, ""},
		{"stop", []string{"stop"}, serviceArgs{action: "stop"}, ""},
		{"status", []string{"status"}, serviceArgs{action: "status"}, ""},
		{"no action", nil, serviceArgs{}, "service: no action given; want install, uninstall, start, stop, status or print"},
		{"unknown action", []string{"restart"}, serviceArgs{}, `service: unknown action "restart"; want install, uninstall, start, stop, status or print`},
		{"flag as action", []string{"--dir", "x"}, serviceArgs{}, `service: unknown action "--dir"`},
		{"install run", []string{"install", "run", "--dir", "x"}, serviceArgs{}, `service install: unexpected argument "run"; give only the flags of 'plugreg run'`},
		{"print run", []string{"print", "run"}, serviceArgs{}, `service print: unexpected argument "run"; give only the flags of 'plugreg run'`},
		{"install newline", []string{"install", "--dir", "a\nb"}, serviceArgs{}, `service install: argument "a\nb" holds the character U+000A, which a service file cannot hold`},
		{"print NUL", []string{"print", "--dir=a\x00b"}, serviceArgs{}, `service print: argument "--dir=a\x00b" holds the character U+0000`},
		{"print invalid UTF-8", []string{"print", "--dir", "a\xffb"}, serviceArgs{}, `service print: argument "a\xffb" is not valid UTF-8`},
		{"stop with argument", []string{"stop", "now"}, serviceArgs{}, `service stop: unexpected argument "now"`},
		{"status with argument", []string{"status", "-v"}, serviceArgs{}, `service status: unexpected argument "-v"`},
		{"start with flag", []string{"start", "--dir", "x"}, serviceArgs{}, `service start: unexpected argument "--dir"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseServiceArgs(tc.args)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("parseServiceArgs(%q) error = %v", tc.args, err)
				}
				if got.action != tc.want.action || !slices.Equal(got.runArgs, tc.want.runArgs) {
					t.Errorf("parseServiceArgs(%q) = %+v, want %+v", tc.args, got, tc.want)
				}
				return
			}
			var ue *usageError
			if !errors.As(err, &ue) || !strings.Contains(ue.msg, tc.wantErr) {
				t.Errorf("parseServiceArgs(%q) error = %v, want a usage error with %q", tc.args, err, tc.wantErr)
			}
		})
	}
	for _, h := range []string{"-h", "-help", "--help", "help"} {
		if _, err := parseServiceArgs([]string{h}); !errors.Is(err, errHelp) {
			t.Errorf("parseServiceArgs([%q]) error = %v, want errHelp", h, err)
		}
	}
}

func TestAbsRunArgs(t *testing.T) {
	cwd := sockettest.Dir(t)
	t.Chdir(cwd)
	other := sockettest.Dir(t)
	in := func(p string) string { return filepath.Join(cwd, p) }
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"dir", []string{"--dir", "plugins"}, []string{"--dir", in("plugins")}},
		{"dir, one dash, inline", []string{"-dir=./a/../plugins"}, []string{"-dir=" + in("plugins")}},
		{"every dir", []string{"--dir", "a", "--dir=b", "-dir", other}, []string{"--dir", in("a"), "--dir=" + in("b"), "-dir", other}},
		{"absolute kept as typed", []string{"--dir", other, "--state=" + other}, []string{"--dir", other, "--state=" + other}},
		{"state and api", []string{"--state", "s.json", "--api=run/api.sock"}, []string{"--state", in("s.json"), "--api=" + in(filepath.Join("run", "api.sock"))}},
		{"no state file", []string{"--state", "", "--state="}, []string{"--state", "", "--state="}},
		{"exec handler", []string{"--handler", "T=exec:./h"}, []string{"--handler", "T=exec:" + in("h")}},
		{"grpc handler, inline", []string{"--handler=T=grpc:h.sock"}, []string{"--handler=T=grpc:" + in("h.sock")}},
		{"handler of no known kind", []string{"--handler", "T=http:h", "--handler", "T"}, []string{"--handler", "T=http:h", "--handler", "T"}},
		{"bool flag takes no value", []string{"--metrics-allow-remote", "--dir", "p"}, []string{"--metrics-allow-remote", "--dir", in("p")}},
		{"bool flag with a value", []string{"--metrics-allow-remote=true", "--dir", "p"}, []string{"--metrics-allow-remote=true", "--dir", in("p")}},
		{"other flags untouched",
			[]string{"--metrics", "localhost:9402", "--api-group", "wheel", "--accept", "T=./x", "--interval", "1s", "--full-scan-every=3", "--dir", "p"},
			[]string{"--metrics", "localhost:9402", "--api-group", "wheel", "--accept", "T=./x", "--interval", "1s", "--full-scan-every=3", "--dir", in("p")}},
		{"a value like a flag", []string{"--api-group", "--dir", "--state", "s"}, []string{"--api-group", "--dir", "--state", in("s")}},
		{"stops at an unknown flag", []string{"--bogus", "--dir", "p"}, []string{"--bogus", "--dir", "p"}},
		{"stops at --", []string{"--", "--dir", "p"}, []string{"--", "--dir", "p"}},
		{"stops at an argument", []string{"run", "--dir", "p"}, []string{"run", "--dir", "p"}},
		{"no value", []string{"--dir"}, []string{"--dir"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := slices.Clone(tc.args)
			got, err := absRunArgs(args)
			if err != nil {
				t.Fatalf("absRunArgs(%q) error = %v", tc.args, err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("absRunArgs(%q) = %q, want %q", tc.args, got, tc.want)
			}
			if !slices.Equal(args, tc.args) {
				t.Errorf("absRunArgs changed its argument to %q", args)
			}
		})
	}
}

// TestAbsRunArgsPathFlags: every flag of `plugreg run` whose usage names a
// path (`directory`, `path`, `file`, PATH, SOCKET) has its value made
// absolute, and no other.
func TestAbsRunArgsPathFlags(t *testing.T) {
	t.Chdir(sockettest.Dir(t))
	_, flags := runFlags(io.Discard)
	n := 0
	flags.VisitAll(func(f *flag.Flag) {
		arg, _ := flag.UnquoteUsage(f)
		isPath := slices.Contains([]string{"directory", "path", "file"}, arg) || strings.Contains(arg, "PATH") || strings.Contains(arg, "SOCKET")
		probe := "rel"
		if f.Name == "handler" {
			probe = "T=exec:rel"
		}
		got, err := absFlagValue(f.Name, probe)
		if err != nil {
			t.Fatalf("absFlagValue(%q, %q) error = %v", f.Name, probe, err)
		}
		if made := got != probe; made != isPath {
			t.Errorf("flag -%s (%s): absFlagValue made %q into %q; want a path made absolute: %v", f.Name, arg, probe, got, isPath)
		}
		if isPath {
			n++
		}
	})
	if n != 8 {
		t.Errorf("%d path flags, want 8 (dir, api, state, handler, etcd-cacert, etcd-cert, etcd-key, etcd-password-file)", n)
	}
}

// TestServiceCommandUsage runs `plugreg service` in-process, as main would,
// for command lines that must fail before the service manager is reached.
func TestServiceCommandUsage(t *testing.T) {
	skipWithoutServiceCommand(t)
	for _, tc := range []struct {
		args []string
		code int
		want string // in stderr
	}{
		{[]string{"service"}, 2, "plugreg: service: no action given; want install, uninstall, start, stop, status or print\nrun 'plugreg help' for usage\n"},
		{[]string{"service", "frob"}, 2, `plugreg: service: unknown action "frob"`},
		{[]string{"service", "uninstall", "x"}, 2, `plugreg: service uninstall: unexpected argument "x"`},
		{[]string{"service", "status", "x"}, 2, `plugreg: service status: unexpected argument "x"`},
		{[]string{"service", "install", "run", "--dir", "x"}, 2, `plugreg: service install: unexpected argument "run"`},
		{[]string{"service", "print", "--dir", "a\nb"}, 2, `plugreg: service print: argument "a\nb" holds the character U+000A`},
		{[]string{"service", "print", "--interval", "0s"}, 2, `invalid value "0s" for flag -interval: must be positive`},
		{[]string{"service", "install", "--no-such-flag"}, 2, `flag provided but not defined: -no-such-flag`},
		{[]string{"service", "-h"}, 0, "usage: plugreg service install [RUN FLAGS] | uninstall | start | stop | status | print [RUN FLAGS]\n"},
	} {
		var stdout, stderr bytes.Buffer
		code := exitCode(run(t.Context(), tc.args, &stdout, &stderr), &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) || stdout.Len() != 0 {
			t.Errorf("plugreg %q: exit %d, stdout %q, stderr %q; want exit %d with %q in stderr", tc.args, code, stdout.String(), stderr.String(), tc.code, tc.want)
		}
	}
}

// TestServicePrintAbsolute: `service print` writes the paths of the run
// flags made absolute against the working directory, since the service
// runs in another.
func TestServicePrintAbsolute(t *testing.T) {
	skipWithoutServiceCommand(t)
	cwd := sockettest.Dir(t) // a handler socket path must fit in sun_path
	t.Chdir(cwd)
	if err := os.WriteFile("h.exe", []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	args := []string{"service", "print", "--dir", "plugins", "--state=state.json", "--api", "api.sock",
		"--handler", "T=exec:h.exe", "--handler=U=grpc:./u.sock"}
	code := exitCode(run(t.Context(), args, &stdout, &stderr), &stderr)
	if code != 0 || stderr.Len() != 0 {
		t.Fatalf("plugreg %q: exit %d, stderr %q, want exit 0", args, code, stderr.String())
	}
	for _, p := range []string{"plugins", "state.json", "api.sock", "h.exe", "u.sock"} {
		if abs := filepath.Join(cwd, p); !strings.Contains(stdout.String(), abs) {
			t.Errorf("plugreg %q writes no %s:\n%s", args, abs, stdout.String())
		}
	}
}
