//go:build unix

package scan

import (
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// osFS is the real file system behind the dir seam.
type osFS struct {
	st statter // per OS, in id_*.go
}

// osDir is an open directory. Its entries are stat'ed relative to its file
// descriptor, and its subdirectories opened relative to it, so a path is
// resolved once per directory, not once per entry.
type osDir struct {
	f  *os.File // owns fd; used for ReadDir
	fd int
	fs *osFS
}

func (o *osFS) openRoot(path string) (dir, error) {
	// EINTR is retried here and below, as package os does for these calls.
	// New resolved the root's symlinks; should the root have been replaced
	// by a symlink since, it is followed: the paths reported stay under the
	// root either way.
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC
	fd, err := unix.Open(path, flags, 0)
	for err == unix.EINTR {
		fd, err = unix.Open(path, flags, 0)
	}
	if err != nil {
		return nil, err
	}
	return &osDir{f: os.NewFile(uintptr(fd), path), fd: fd, fs: o}, nil
}

func (d *osDir) sub(name, path string) (dir, error) {
	// O_NOFOLLOW: a subdirectory replaced by a symlink since the directory
	// read is not followed. O_DIRECTORY: nor is anything else, such as a
	// FIFO, opened.
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(d.fd, name, flags, 0)
	for err == unix.EINTR {
		fd, err = unix.Openat(d.fd, name, flags, 0)
	}
	if err != nil {
		return nil, err
	}
	return &osDir{f: os.NewFile(uintptr(fd), path), fd: fd, fs: d.fs}, nil
}

func (d *osDir) entries() ([]fs.DirEntry, error) {
	ents, err := d.f.ReadDir(-1)
	return ents, bare(err)
}

func (d *osDir) isSocket(e fs.DirEntry) bool { return isSocket(e) }

func (d *osDir) id(name, _ string) (ID, error) {
	id, err := d.fs.st.entryID(d.fd, name)
	for err == unix.EINTR {
		id, err = d.fs.st.entryID(d.fd, name)
	}
	return id, err
}

func (d *osDir) close() error { return d.f.Close() }
