package scan

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestStatSocketIsScanID: StatSocket, and StatSocketRaw, give a socket
// file the ID a Scan gives it, and allocates nothing where it makes the system call itself
// (it runs for every liveness check). Not parallel: AllocsPerRun.
func TestStatSocketIsScanID(t *testing.T) {
	needUnixSockets(t)
	root := tempDir(t)
	sock := filepath.Join(root, "a.sock")
	socketFile(t, sock)
	got := mustScan(t, mustNew(t, nil, root))
	if len(got.Entries) != 1 {
		t.Fatalf("Scan() = %v, want one entry", got)
	}
	for name, stat := range map[string]func(string) (SocketFile, error){"StatSocket": StatSocket, "StatSocketRaw": StatSocketRaw} {
		f, err := stat(sock)
		if err != nil || f.ID != got.Entries[0].ID {
			t.Errorf("%s(a.sock) = %+v, %v, want the scan's ID %+v", name, f, err, got.Entries[0].ID)
		}
		if n := testing.AllocsPerRun(20, func() { _, _ = stat(sock) }); statSocketAllocFree && n != 0 {
			t.Errorf("%s of a socket allocates %v times, want 0", name, n)
		}
	}
}

// TestStatSocketNotSocket: StatSocket and StatSocketRaw refuse a file that is not a socket
// with what it is, and a missing one with fs.ErrNotExist.
func TestStatSocketNotSocket(t *testing.T) {
	t.Parallel()
	root := tempDir(t)
	file, dir := filepath.Join(root, "file"), filepath.Join(root, "dir")
	writeFile(t, file)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, stat := range map[string]func(string) (SocketFile, error){"StatSocket": StatSocket, "StatSocketRaw": StatSocketRaw} {
		for _, p := range []string{file, dir} {
			fi, err := os.Lstat(p)
			if err != nil {
				t.Fatal(err)
			}
			_, err = stat(p)
			if ns, ok := errors.AsType[*NotSocketError](err); !ok || ns.Mode != fi.Mode() || ns.Path != p {
				t.Errorf("%s(%s) = %v, want a *NotSocketError with mode %v", name, p, err, fi.Mode())
			}
		}
		if _, err := stat(filepath.Join(root, "missing.sock")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s(missing.sock) = %v, want fs.ErrNotExist", name, err)
		}
	}
}
