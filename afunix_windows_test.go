package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestProbeAFUnix checks the message of a Windows without AF_UNIX. Wine is
// one; on a Windows that has AF_UNIX the probe passes and the test checks
// that it left nothing behind.
func TestProbeAFUnix(t *testing.T) {
	for _, tc := range []struct {
		name string
		dir  func(tmp string) string // the plugin dir, given a temp dir
	}{
		{"parent exists", func(tmp string) string { return filepath.Join(tmp, "plugins") }},
		{"parent missing", func(tmp string) string { return filepath.Join(tmp, "missing", "plugins") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := shortTempDir(t)
			err := probeAFUnix(tc.dir(tmp))
			if err == nil {
				if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
					t.Errorf("probeAFUnix left %v behind in %s", ents, tmp)
				}
				t.Skip("this system has AF_UNIX sockets: the probe passed, so its error message cannot be checked here")
			}
			const want = "this Windows has no AF_UNIX sockets (needs Windows 10 1803 / Server 2019 or later)"
			if err.Error() != want {
				t.Errorf("probeAFUnix() error = %q, want %q", err, want)
			}
		})
	}
}
