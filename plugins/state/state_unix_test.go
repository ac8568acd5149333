//go:build unix

package state

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
)

// TestSaveMode checks that the state file is private whatever the umask
// allows, and that replacing a file with another mode gives 0600 again.
func TestSaveMode(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	path := filepath.Join(sockettest.Dir(t), "state.json")
	if err := os.WriteFile(path, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Save(path, testState(), 0); err != nil {
		t.Fatalf("Save = %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("mode of the state file = %v, want 0600", got)
	}
}
