//go:build !linux && !freebsd && !darwin && !windows

package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

func TestServiceUnsupported(t *testing.T) {
	want := "plugreg: service: not supported on " + runtime.GOOS + "; run 'plugreg run [flags]' from the init system instead"
	for _, args := range [][]string{{"service"}, {"service", "-h"}, {"service", "install", "--dir", "/p"}, {"service", "print"}, {"service", "stop"}} {
		var stdout, stderr bytes.Buffer
		code := exitCode(run(t.Context(), args, &stdout, &stderr), &stderr)
		if code != 2 || !strings.Contains(stderr.String(), want) {
			t.Errorf("plugreg %q: exit %d, stderr %q; want exit 2 with %q", args, code, stderr.String(), want)
		}
	}
}
