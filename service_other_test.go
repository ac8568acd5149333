//go:build !windows

package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestServiceOnlyOnWindows(t *testing.T) {
	for _, args := range [][]string{{"service"}, {"service", "install", "--dir", "/p"}, {"service", "stop"}} {
		var stdout, stderr bytes.Buffer
		code := exitCode(run(t.Context(), args, &stdout, &stderr), &stderr)
		const want = "plugreg: service: only on Windows; see the README for systemd, rc.d and launchd"
		if code != 2 || !strings.Contains(stderr.String(), want) {
			t.Errorf("plugreg %q: exit %d, stderr %q; want exit 2 with %q", args, code, stderr.String(), want)
		}
	}
}
