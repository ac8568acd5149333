//go:build unix

package scan

import (
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// osFS is the real file system behind the dir seam.
type osFS struct{}

// osDir is an open directory. Its entries are stat'ed relative to its file
// descriptor, and its subdirectories opened relative to it, so a path is
// resolved once per directory, not once per entry, and a directory replaced
// by a symlink is never followed.
type osDir struct {
	fd   int
	path string
	f    *os.File // owns fd once made, for ReadDir; made only when needed, as most ticks only stat
	raw  bool     // stat with raw system calls (lstatAtRaw): a rawDir's
}

func (*osFS) openRoot(path string, raw bool) (dir, error) {
	if raw {
		return openRootRaw(path)
	}
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
	return &osDir{fd: fd, path: path}, nil
}

// statRoot stats the root at path, following symlinks as openRoot does,
// raw as openRoot; it returns ENOTDIR if path is not a directory.
func (*osFS) statRoot(path string, raw bool) (ID, error) {
	return statRootSys(path+"\x00", raw)
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
	return &osDir{fd: fd, path: path}, nil
}

func (d *osDir) stat() (ID, error) {
	var st unix.Stat_t
	err := unix.Fstat(d.fd, &st)
	for err == unix.EINTR {
		err = unix.Fstat(d.fd, &st)
	}
	return statID(&st), err
}

func (d *osDir) statDir(name, _ string) (ID, error) {
	return d.statAt(name, unix.S_IFDIR, unix.ENOTDIR)
}

func (d *osDir) entries() ([]fs.DirEntry, error) {
	if d.f == nil {
		d.f = os.NewFile(uintptr(d.fd), d.path)
	}
	ents, err := d.f.ReadDir(-1)
	return ents, bare(err)
}

func (d *osDir) isSocket(e fs.DirEntry) bool { return isSocket(e) }

// id returns ENOENT if name is no longer a socket, as if it were gone.
func (d *osDir) id(name, _ string) (ID, error) {
	return d.statAt(name, unix.S_IFSOCK, unix.ENOENT)
}

// statAt returns the ID of name in d, without following a symlink, or
// wrongType if it is not of type typ (S_IFDIR, S_IFSOCK).
func (d *osDir) statAt(name string, typ uint32, wrongType error) (ID, error) {
	var st unix.Stat_t // on the stack: both calls are direct
	var err error
	if d.raw {
		err = lstatAtRaw(d.fd, name, &st)
	} else {
		err = lstatAt(d.fd, name, &st)
	}
	switch {
	case err != nil:
		return ID{}, err
	case uint32(st.Mode)&unix.S_IFMT != typ:
		return ID{}, wrongType
	}
	return statID(&st), nil
}

func (d *osDir) close() error {
	if d.f != nil {
		return d.f.Close()
	}
	return unix.Close(d.fd)
}
