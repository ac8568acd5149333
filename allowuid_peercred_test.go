//go:build linux || darwin || freebsd || dragonfly || netbsd || openbsd

package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestAllowUIDUsage runs bad --allow-uid values in process: usage errors,
// exit 2, before anything is opened.
func TestAllowUIDUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--allow-uid", "x"}, `invalid value "x" for flag -allow-uid: "x" is not a decimal uid`},
		{[]string{"run", "--allow-uid", "0,x"}, `invalid value "0,x" for flag -allow-uid: "x" is not a decimal uid`},
		{[]string{"run", "--allow-uid", ""}, `invalid value "" for flag -allow-uid: "" is not a decimal uid`},
		{[]string{"run", "--allow-uid", "0", "--allow-uid", "-5"}, `invalid value "-5" for flag -allow-uid: "-5" is not a decimal uid`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := exitCode(run(t.Context(), tc.args, &stdout, &stderr), &stderr)
			if code != 2 || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("plugreg %q: exit %d, stderr %q; want exit 2 with %q", tc.args, code, stderr.String(), tc.want)
			}
		})
	}
}
