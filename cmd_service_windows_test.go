package main

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
)

// The argument handling of `plugreg service` runs before any call to the
// service manager, so it is tested without one (and under wine).

func TestParseServiceArgs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    serviceArgs
		wantErr string // in the usage error; "" for none
	}{
		{"install", []string{"install"}, serviceArgs{action: "install", runArgs: []string{}}, ""},
		{"install with run flags", []string{"install", "--dir", `D:\plugins`, "--interval=2s"},
			serviceArgs{action: "install", runArgs: []string{"--dir", `D:\plugins`, "--interval=2s"}}, ""},
		{"uninstall", []string{"uninstall"}, serviceArgs{action: "uninstall"}, ""},
		{"start", []string{"start"}, serviceArgs{action: "start"}, ""},
		{"stop", []string{"stop"}, serviceArgs{action: "stop"}, ""},
		{"no action", nil, serviceArgs{}, "service: no action given; want install, uninstall, start or stop"},
		{"unknown action", []string{"restart"}, serviceArgs{}, `service: unknown action "restart"; want install, uninstall, start or stop`},
		{"flag as action", []string{"--dir", "x"}, serviceArgs{}, `service: unknown action "--dir"`},
		{"install run", []string{"install", "run", "--dir", "x"}, serviceArgs{}, `service install: unexpected argument "run"; give only the flags of 'plugreg run'`},
		{"stop with argument", []string{"stop", "now"}, serviceArgs{}, `service stop: unexpected argument "now"`},
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
}

// TestServiceCommandUsage runs `plugreg service` in-process, as main would,
// for command lines that must fail before the service manager is reached.
func TestServiceCommandUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string // in stderr
	}{
		{[]string{"service"}, 2, "plugreg: service: no action given"},
		{[]string{"service", "frob"}, 2, `plugreg: service: unknown action "frob"`},
		{[]string{"service", "uninstall", "x"}, 2, `plugreg: service uninstall: unexpected argument "x"`},
		{[]string{"service", "-h"}, 0, "usage: plugreg service install [RUN FLAGS] | uninstall | start | stop"},
	} {
		var stdout, stderr bytes.Buffer
		code := exitCode(run(t.Context(), tc.args, &stdout, &stderr), &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("plugreg %q: exit %d, stderr %q; want exit %d with %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
}
