package register

import (
	"errors"
	"sync"
	"testing"

	"github.com/plugreg/plugreg/scan"
)

// errTestEnded is what a scan made by scansEndWithTest returns once its
// test has ended.
var errTestEnded = errors.New("test ended")

// scansEndWithTest returns f wrapped so that no scan outlives t. Run does
// not wait for a scan in progress when it returns (a hung scan must not
// hold the agent's shutdown), and a real scan logs (a directory gone, a
// socket that cannot be stat'ed) to t's output, which must not be written
// once t has ended. So t's clean-up waits for the scan in progress, and
// the scans after it return errTestEnded without scanning. Call it before
// the clean-up that stops Run is registered, so that it runs after.
func scansEndWithTest(t *testing.T, f func() (scan.Snapshot, error)) func() (scan.Snapshot, error) {
	var mu sync.Mutex // held by a scan in progress
	ended := false
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		ended = true
	})
	return func() (scan.Snapshot, error) {
		mu.Lock()
		defer mu.Unlock()
		if ended {
			return scan.Snapshot{}, errTestEnded
		}
		return f()
	}
}
