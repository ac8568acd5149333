package main

import (
	"bytes"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// needUnixSockets skips the test when this system cannot create unix-domain
// sockets: Windows before 10 1803, and wine.
func needUnixSockets(t *testing.T) {
	t.Helper()
	l, err := net.Listen("unix", filepath.Join(shortTempDir(t), "probe"))
	if err != nil {
		t.Skipf("no AF_UNIX sockets on this system (Windows 10 1803 or later is needed, and wine has none): %v", err)
	}
	l.Close()
}

// TestRunInProcess runs command lines that need neither a socket nor the
// built binary through run and exitCode, as main does; it runs everywhere,
// wine included, where the end-to-end tests cannot.
func TestRunInProcess(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		code       int
		wantStdout string
		wantStderr string
	}{
		{"no command", nil, 2, "", "plugreg: no command given"},
		{"unknown command", []string{"frobnicate"}, 2, "", `plugreg: unknown command "frobnicate"`},
		{"help", []string{"help"}, 0, "usage: plugreg <command> [flags]", ""},
		{"unknown flag", []string{"list", "--frob"}, 2, "", "flag provided but not defined: -frob"},
		{"bad output", []string{"list", "-o", "yaml"}, 2, "", `invalid value "yaml" for flag -o`},
		{"example without name", []string{"example-plugin", "--dir", "x"}, 2, "", "flag -name is required"},
		{"version", []string{"version"}, 0, runtime.GOOS + "/" + runtime.GOARCH, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := exitCode(run(t.Context(), tc.args, &stdout, &stderr), &stderr)
			if code != tc.code || !strings.Contains(stdout.String(), tc.wantStdout) || !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("plugreg %q: exit %d, stdout %q, stderr %q; want exit %d, %q in stdout, %q in stderr",
					tc.args, code, stdout.String(), stderr.String(), tc.code, tc.wantStdout, tc.wantStderr)
			}
		})
	}
}
