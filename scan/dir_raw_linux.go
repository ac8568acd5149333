package scan

import (
	"encoding/binary"
	"io/fs"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawDir is an open directory below a settled plugin dir, read with raw
// system calls only (openat, getdents64, fstatat, close through
// unix.RawSyscall6): a full scan of a settled dir then wakes none of the Go
// runtime's threads, as an idle scan's stats do not (see statPathLinux).
// Its entries, subdirectories and sockets are what an osDir gives; it is
// one whose stats are raw (osDir.raw), and whose other calls are too.
type rawDir struct {
	osDir
	dev uint64 // the device of the plugin dir it is below
}

// openRootRaw opens the plugin dir at path as openRoot does, with a raw
// openat, as a rawDir; where the platform stats with a converting system
// call (sysFstatat is 0), as an osDir, with the usual system calls.
func openRootRaw(path string) (dir, error) {
	if sysFstatat == 0 {
		return (&osFS{}).openRoot(path, false)
	}
	zpath, err := unix.BytePtrFromString(path)
	if err != nil {
		return nil, err
	}
	fd, err := openatRaw(unix.AT_FDCWD, zpath, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		return nil, err
	}
	d := &rawDir{osDir: osDir{fd: fd, path: path, raw: true}}
	var st unix.Stat_t
	if err := fstatRaw(fd, &st); err != nil {
		d.close()
		return nil, err
	}
	d.dev = uint64(st.Dev)
	return d, nil
}

// statRootSys is statRoot's stat: statPathLinux, following symlinks.
func statRootSys(zpath string, raw bool) (ID, error) { return statPathLinux(zpath, true, raw) }

// openatRaw is openat(dirfd, zpath, flags) with unix.RawSyscall6,
// retrying EINTR.
func openatRaw(dirfd int, zpath *byte, flags int) (int, error) {
	for {
		fd, _, errno := unix.RawSyscall6(unix.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(zpath)), uintptr(flags), 0, 0, 0)
		switch errno {
		case 0:
			return int(fd), nil
		case unix.EINTR:
			continue
		}
		return -1, errno
	}
}

// fstatRaw stats the open file fd with a raw fstatat(fd, "", AT_EMPTY_PATH).
func fstatRaw(fd int, st *unix.Stat_t) error {
	empty := [1]byte{}
	for {
		_, _, errno := unix.RawSyscall6(sysFstatat, uintptr(fd), uintptr(unsafe.Pointer(&empty[0])), uintptr(unsafe.Pointer(st)), unix.AT_EMPTY_PATH, 0, 0)
		switch errno {
		case 0:
			return nil
		case unix.EINTR:
			continue
		}
		return errno
	}
}

func (d *rawDir) stat() (ID, error) {
	var st unix.Stat_t
	err := fstatRaw(d.fd, &st)
	return statID(&st), err
}

// sub opens the subdirectory name as osDir.sub does, with a raw openat. A
// subdirectory on another device than the plugin dir (a file system
// mounted below it) is an osDir: the calls below it are not raw, as an
// idle scan's are not (see walk.same).
func (d *rawDir) sub(name, path string) (dir, error) {
	var buf [lstatAtBuf]byte
	if len(name) >= len(buf) {
		return nil, unix.ENAMETOOLONG
	}
	copy(buf[:], name)
	fd, err := openatRaw(d.fd, &buf[0], unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := fstatRaw(fd, &st); err != nil {
		closeRaw(fd)
		return nil, err
	}
	if uint64(st.Dev) != d.dev {
		return &osDir{fd: fd, path: path}, nil
	}
	return &rawDir{osDir: osDir{fd: fd, path: path, raw: true}, dev: d.dev}, nil
}

func (d *rawDir) close() error { return closeRaw(d.fd) }

// closeRaw closes fd with a raw close; EINTR is not retried, as the
// descriptor is released either way.
func closeRaw(fd int) error {
	if _, _, errno := unix.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0); errno != 0 {
		return errno
	}
	return nil
}

// direntBuf is the size of the buffer entries reads a directory into, as
// package os reads one.
const direntBuf = 8 << 10

// entries reads the whole directory with raw getdents64 calls. The type of
// an entry comes from its d_type; where the file system leaves it unknown,
// from a raw fstatat, as package os does with an lstat (an entry gone
// meanwhile is left out).
func (d *rawDir) entries() ([]fs.DirEntry, error) {
	buf := make([]byte, direntBuf)
	var out []fs.DirEntry
	for {
		n, _, errno := unix.RawSyscall(unix.SYS_GETDENTS64, uintptr(d.fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
		switch {
		case errno == unix.EINTR:
			continue
		case errno != 0:
			return out, errno
		case n == 0:
			return out, nil
		}
		var err error
		if out, err = d.appendDirents(out, buf[:n]); err != nil {
			return out, err
		}
	}
}

// Offsets in a struct linux_dirent64: d_ino, d_off (8 bytes each), then
// d_reclen, d_type and the name with its NUL.
const (
	direntReclen = 16
	direntType   = 18
	direntName   = 19
)

// appendDirents appends the entries of b, what getdents64 returned, to
// out, without "." and "..".
func (d *rawDir) appendDirents(out []fs.DirEntry, b []byte) ([]fs.DirEntry, error) {
	for len(b) > direntName {
		reclen := int(binary.NativeEndian.Uint16(b[direntReclen:]))
		if reclen <= direntName || reclen > len(b) {
			return out, unix.EIO // a record the kernel would not write
		}
		rec := b[:reclen]
		b = b[reclen:]
		nameb := rec[direntName:]
		for i, c := range nameb {
			if c == 0 {
				nameb = nameb[:i]
				break
			}
		}
		if string(nameb) == "." || string(nameb) == ".." {
			continue
		}
		name := string(nameb)
		typ, ok := direntMode(rec[direntType])
		if !ok {
			var st unix.Stat_t
			switch err := lstatAtRaw(d.fd, name, &st); {
			case err == unix.ENOENT:
				continue
			case err != nil:
				return out, err
			}
			typ = statMode(st.Mode)
		}
		out = append(out, rawEntry{name: name, typ: typ, dir: d.path})
	}
	return out, nil
}

// direntMode is the type of a directory entry of d_type typ, and false if
// the file system left it unknown.
func direntMode(typ byte) (fs.FileMode, bool) {
	switch typ {
	case unix.DT_REG:
		return 0, true
	case unix.DT_DIR:
		return fs.ModeDir, true
	case unix.DT_LNK:
		return fs.ModeSymlink, true
	case unix.DT_SOCK:
		return fs.ModeSocket, true
	case unix.DT_FIFO:
		return fs.ModeNamedPipe, true
	case unix.DT_CHR:
		return fs.ModeDevice | fs.ModeCharDevice, true
	case unix.DT_BLK:
		return fs.ModeDevice, true
	}
	return 0, false
}

// statMode is the type of a file of st_mode mode.
func statMode(mode uint32) fs.FileMode {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	case unix.S_IFREG:
		return 0
	}
	return fs.ModeIrregular
}

// rawEntry is an entry read by rawDir.entries.
type rawEntry struct {
	name string
	typ  fs.FileMode
	dir  string // the path of the directory it was read from
}

func (e rawEntry) Name() string      { return e.name }
func (e rawEntry) IsDir() bool       { return e.typ.IsDir() }
func (e rawEntry) Type() fs.FileMode { return e.typ }

// Info lstats the entry now, by path.
func (e rawEntry) Info() (fs.FileInfo, error) { return os.Lstat(filepath.Join(e.dir, e.name)) }
