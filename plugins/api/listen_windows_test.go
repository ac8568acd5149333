package api

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/windows"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
)

// dacl returns the DACL of the file at path (itself, not a reparse point's
// target) in SDDL.
func dacl(t *testing.T, path string) string {
	t.Helper()
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := windows.CreateFile(p, windows.READ_CONTROL, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE,
		nil, windows.OPEN_EXISTING, windows.FILE_FLAG_OPEN_REPARSE_POINT|windows.FILE_FLAG_BACKUP_SEMANTICS, 0)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer windows.CloseHandle(h)
	sd, err := windows.GetSecurityInfo(h, windows.SE_FILE_OBJECT, windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		t.Fatalf("GetSecurityInfo(%s): %v", path, err)
	}
	return sd.String()
}

// TestRestrictToAdmins checks the DACL on a regular file, which works
// where AF_UNIX does not (wine).
func TestRestrictToAdmins(t *testing.T) {
	t.Parallel()
	path := filepath.Join(sockettest.Dir(t), "file")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := restrictToAdmins(path); err != nil {
		t.Fatalf("restrictToAdmins(%q) error = %v", path, err)
	}
	got := dacl(t, path)
	if got != adminsOnly && sockettest.UnderWine() {
		t.Skipf("wine does not keep a DACL set on a file (it reads back %q); restrictToAdmins returned no error", got)
	}
	if got != adminsOnly {
		t.Errorf("DACL of %s = %q, want %q", path, got, adminsOnly)
	}
}

func TestListenAPIGroupUnsupported(t *testing.T) {
	t.Parallel()
	path := filepath.Join(sockettest.Dir(t), "sub", "api.sock")
	l, err := ListenAPI(path, "Users")
	if err == nil {
		l.Close()
		t.Fatalf("ListenAPI(%q, \"Users\") = nil error, want groups unsupported", path)
	}
	if want := `api socket group "Users": not supported on Windows`; !strings.Contains(err.Error(), want) {
		t.Errorf("ListenAPI(%q, \"Users\") error = %q, want %q", path, err, want)
	}
	if _, err := os.Lstat(filepath.Dir(path)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ListenAPI with a group created %s: %v", filepath.Dir(path), err)
	}
}

func TestListenAPIAdminsOnly(t *testing.T) {
	t.Parallel()
	dir := sockettest.Dir(t)
	if l, err := net.Listen("unix", filepath.Join(dir, "probe")); err != nil {
		t.Skipf("no AF_UNIX sockets on this system (Windows 10 1803 or later is needed, and wine has none): %v", err)
	} else {
		l.Close()
	}
	path := filepath.Join(dir, "api.sock")
	l, err := ListenAPI(path, "")
	if err != nil {
		t.Fatalf("ListenAPI(%q, \"\") error = %v", path, err)
	}
	defer l.Close()
	if got := dacl(t, path); got != adminsOnly {
		t.Errorf("DACL of the API socket = %q, want %q", got, adminsOnly)
	}
}

// TestListenUnixNoAFUnix checks the message of a Windows without AF_UNIX.
// Wine is one; on a Windows that has AF_UNIX the listen succeeds, and the
// message cannot be checked here.
func TestListenUnixNoAFUnix(t *testing.T) {
	path := filepath.Join(sockettest.Dir(t), "api.sock")
	l, err := ListenUnix(path, 0)
	if err == nil {
		l.Close()
		t.Skip("this system has AF_UNIX sockets: the error message cannot be checked here")
	}
	want := "listen " + path + ": this Windows has no AF_UNIX sockets (needs Windows 10 1803 / Server 2019 or later)"
	if err.Error() != want {
		t.Errorf("ListenUnix() error = %q, want %q", err, want)
	}
}
