//go:build unix

package register

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/plugreg/plugreg/plugins/handler"
)

// TestVerifyExecHandlerMissing: Verify with an exec handler whose program
// is missing, then installed.
func TestVerifyExecHandlerMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "handler")
	e := &handler.Exec{Type: "CSIPlugin", Path: path}
	checkVerifyHandlerDown(t, e, func() handler.Handler {
		if err := os.WriteFile(path, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return e
	})
}
