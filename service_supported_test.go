//go:build linux || freebsd || darwin || windows

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServiceCommandUsage runs `plugreg service` in-process, as main would,
// for command lines that must fail before the service manager is reached.
func TestServiceCommandUsage(t *testing.T) {
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
	cwd := shortTempDir(t) // a handler socket path must fit in sun_path
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
