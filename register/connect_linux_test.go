package register

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
)

// TestConnectOnceRaw: the raw connect check answers as connectOnce does, and
// the raw connect of a GetInfo check as connectNonblocking does,
// with the same errors, for a socket that is served, one nobody listens
// on, a file that is no socket, and a missing path.
func TestConnectOnceRaw(t *testing.T) {
	dir := sockettest.Dir(t)
	served := filepath.Join(dir, "served.sock")
	l, err := net.Listen("unix", served)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dead := filepath.Join(dir, "dead.sock")
	ld, err := net.Listen("unix", dead)
	if err != nil {
		t.Fatal(err)
	}
	ld.(*net.UnixListener).SetUnlinkOnClose(false)
	ld.Close()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want error // nil: connects
	}{
		{served, nil},
		{dead, syscall.ECONNREFUSED},
		{file, syscall.ECONNREFUSED},
		{filepath.Join(dir, "missing.sock"), syscall.ENOENT},
	}
	for _, tc := range tests {
		raw, usual := connectOnceRaw(tc.path), connectOnce(tc.path)
		if tc.want == nil && raw != nil || tc.want != nil && !errors.Is(raw, tc.want) {
			t.Errorf("connectOnceRaw(%s) = %v, want %v", filepath.Base(tc.path), raw, tc.want)
		}
		if (raw == nil) != (usual == nil) || raw != nil && raw.Error() != usual.Error() {
			t.Errorf("%s: connectOnceRaw = %v, connectOnce = %v", filepath.Base(tc.path), raw, usual)
		}
		fdRaw, raw := connectNonblockingRaw(tc.path)
		fdUsual, usual := connectNonblocking(tc.path)
		if (raw == nil) != (usual == nil) || raw != nil && raw.Error() != usual.Error() {
			t.Errorf("%s: connectNonblockingRaw = %v, connectNonblocking = %v", filepath.Base(tc.path), raw, usual)
		}
		for _, fd := range []int{fdRaw, fdUsual} {
			if fd >= 0 {
				if err := closeFD(fd); err != nil {
					t.Errorf("%s: closeFD = %v", filepath.Base(tc.path), err)
				}
			}
		}
	}
}
