package scan

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// quick returns the Scanner's statPath and localFS.
func (*osFS) quick() (func(string, bool, bool) (ID, error), func(string) bool) {
	return statPathLinux, LocalFS
}

// statPathLinux is statPath. When raw, it stats with unix.RawSyscall6,
// which the Go runtime does not see: its sysmon thread, asleep while the
// agent idles, is woken by every system call made the usual way, and then
// polls every 20 µs until the goroutine is done. That is most of what an
// idle scan would cost beyond its one system call per directory. A raw call
// holds the goroutine's thread and P until it returns, which a stat of a
// directory on a local file system does at once.
func statPathLinux(zpath string, follow, raw bool) (ID, error) {
	if !raw || sysFstatat == 0 {
		return statPathSys(zpath, follow)
	}
	flags := uintptr(unix.AT_SYMLINK_NOFOLLOW)
	if follow {
		flags = 0
	}
	cwd := unix.AT_FDCWD // a variable: a negative constant converts to no uintptr
	atFDCWD := uintptr(cwd)
	var st unix.Stat_t
	errno := unix.EINTR
	for errno == unix.EINTR {
		_, _, errno = unix.RawSyscall6(sysFstatat, atFDCWD, uintptr(unsafe.Pointer(unsafe.StringData(zpath))), uintptr(unsafe.Pointer(&st)), flags, 0, 0)
	}
	var err error
	if errno != 0 {
		err = errno
	}
	return dirID(&st, err)
}

// LocalFS reports whether the directory at path is on a file system kept
// in memory or on local disks, where a stat or the lookup of a path below
// it never waits on a server: tmpfs, ramfs, ext2/3/4, XFS, Btrfs, F2FS,
// overlayfs (a container's root) or ZFS. Not NFS, CIFS, FUSE and the like.
// It is false on any doubt, and on other OSes.
func LocalFS(path string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false
	}
	switch uint32(st.Type) {
	case unix.TMPFS_MAGIC, unix.RAMFS_MAGIC, unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC,
		unix.BTRFS_SUPER_MAGIC, unix.F2FS_SUPER_MAGIC, unix.OVERLAYFS_SUPER_MAGIC, zfsSuperMagic:
		return true
	}
	return false
}

// zfsSuperMagic is ZFS's f_type, which golang.org/x/sys does not name.
const zfsSuperMagic = 0x2fc12fc1
