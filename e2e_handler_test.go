package main

import (
	"strings"
	"testing"
)

// End-to-end tests of --handler that run on every OS; those that run sh
// scripts are in e2e_handler_unix_test.go.

// TestEndToEndHandlerUsage: a --handler whose program is missing, whose
// socket is not an absolute path, or that is malformed, stops the agent at
// start with a usage error (exit 2).
func TestEndToEndHandlerUsage(t *testing.T) {
	e := newAgentEnv(t)
	tests := []struct{ value, want string }{
		{"T=exec:/nope", `invalid value "T=exec:/nope" for flag -handler: program /nope: `},
		{"T=http:/x.sock", `invalid value "T=http:/x.sock" for flag -handler: unknown handler "http:/x.sock" for type T, want TYPE=exec:PATH or TYPE=grpc:SOCKET`},
		{"T=grpc:x.sock", `invalid value "T=grpc:x.sock" for flag -handler: socket x.sock is not an absolute path`},
		{"=exec:/nope", `invalid value "=exec:/nope" for flag -handler: empty plugin type`},
	}
	for _, tc := range tests {
		_, stderr, code := plugreg(t, e.runArgs("--handler", tc.value)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("run --handler %s: exit %d, stderr %q; want 2 and %q", tc.value, code, stderr, tc.want)
		}
	}
}
