package scan

import (
	"io/fs"
	"os"

	"golang.org/x/sys/windows"
)

// osFS is the real file system behind the dir seam.
type osFS struct{}

// osDir is an open directory. Windows has no openat or fstatat in its Win32
// API, so entries are stat'ed and subdirectories opened by their full path.
type osDir struct {
	f    *os.File
	path string
}

func (*osFS) openRoot(path string, _ bool) (dir, error) {
	d, err := openDir(path)
	if err != nil {
		return nil, err
	}
	// os.Open opens a file as readily as a directory, and reading a file as a
	// directory can fail with ERROR_PATH_NOT_FOUND (wine does), which would
	// pass for a missing plugin dir; so does syscall.ENOTDIR, which is
	// ERROR_PATH_NOT_FOUND on Windows.
	fi, err := d.f.Stat()
	if err == nil && !fi.IsDir() {
		err = windows.ERROR_DIRECTORY
	}
	if err != nil {
		d.close()
		return nil, bare(err)
	}
	return d, nil
}

// statRoot opens the root at path to stat it: Windows identifies a file
// (its volume serial and file index) through an open handle.
func (fsys *osFS) statRoot(path string, raw bool) (ID, error) {
	return statByOpen(fsys.openRoot)(path, raw)
}

// sub opens the subdirectory at path. The walk only calls it for entries
// that ReadDir reported as directories, which excludes symlinks and
// junctions (Go ≥ 1.23 reports a junction as irregular, not as a directory).
// Whatever replaced the directory since is, at worst, read as an empty one.
func (d *osDir) sub(_, path string) (dir, error) {
	return openDir(path)
}

func openDir(path string) (*osDir, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, bare(err)
	}
	return &osDir{f: f, path: path}, nil
}

func (d *osDir) stat() (ID, error) {
	var fi windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(windows.Handle(d.f.Fd()), &fi); err != nil {
		return ID{}, err
	}
	return infoID(&fi), nil
}

// statDir opens the subdirectory by its path, as sub does.
func (d *osDir) statDir(_, path string) (ID, error) { return dirID(path) }

func (d *osDir) entries() ([]fs.DirEntry, error) {
	ents, err := d.f.ReadDir(-1)
	return ents, bare(err)
}

func (d *osDir) isSocket(e fs.DirEntry) bool { return isSocket(e, d.path) }

func (d *osDir) id(_, path string) (ID, error) { return entryID(path) }

func (d *osDir) close() error { return d.f.Close() }
