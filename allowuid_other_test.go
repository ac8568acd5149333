//go:build !linux && !darwin && !freebsd && !dragonfly && !netbsd && !openbsd

package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

// TestAllowUIDUnsupported: where no peer credentials can be read,
// --allow-uid is a usage error, not a filter that lets nobody in.
func TestAllowUIDUnsupported(t *testing.T) {
	args := []string{"run", "--allow-uid", "0"}
	var stdout, stderr bytes.Buffer
	code := exitCode(run(t.Context(), args, &stdout, &stderr), &stderr)
	want := `invalid value "0" for flag -allow-uid: peer credentials are not supported on ` + runtime.GOOS
	if code != 2 || !strings.Contains(stderr.String(), want) {
		t.Errorf("plugreg %q: exit %d, stderr %q; want exit 2 with %q", args, code, stderr.String(), want)
	}
}
