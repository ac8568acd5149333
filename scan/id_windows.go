package scan

import (
	"syscall"

	"golang.org/x/sys/windows"
)

// entryID returns the ID of the file at path, read now from an open handle;
// os.SameFile would read the file ID lazily, from whatever is at the path
// when it compares. A reparse point (such as a socket) is opened itself,
// not its target.
//
// Dev is the volume serial number and Ino the 64-bit file index (ReFS file
// IDs are 128 bits; the low 64 are used). Mtime is the last write time and
// Birth the creation time, both in 100 ns steps; Ctime is 0.
func entryID(path string) (ID, error) {
	fi, err := fileInfo(path)
	if err != nil {
		return ID{}, err
	}
	return infoID(&fi), nil
}

// dirID is entryID for a directory. It returns syscall.ENOTDIR (which is
// ERROR_PATH_NOT_FOUND) if path is not a directory, or is a junction or a
// symbolic link to one.
func dirID(path string) (ID, error) {
	fi, err := fileInfo(path)
	if err != nil {
		return ID{}, err
	}
	if fi.FileAttributes&windows.FILE_ATTRIBUTE_DIRECTORY == 0 || fi.FileAttributes&windows.FILE_ATTRIBUTE_REPARSE_POINT != 0 {
		return ID{}, syscall.ENOTDIR
	}
	return infoID(&fi), nil
}

// fileInfo opens the file at path, without following a reparse point, and
// returns its information.
func fileInfo(path string) (windows.ByHandleFileInformation, error) {
	var fi windows.ByHandleFileInformation
	h, err := openNoFollow(path)
	if err != nil {
		return fi, err
	}
	defer windows.CloseHandle(h)
	err = windows.GetFileInformationByHandle(h, &fi)
	return fi, err
}

// openNoFollow opens the file at path to read its attributes, without
// following a reparse point (such as a socket or a symlink).
func openNoFollow(path string) (windows.Handle, error) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return 0, err
	}
	return windows.CreateFile(p, windows.FILE_READ_ATTRIBUTES,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil,
		windows.OPEN_EXISTING, windows.FILE_FLAG_OPEN_REPARSE_POINT|windows.FILE_FLAG_BACKUP_SEMANTICS, 0)
}

func infoID(fi *windows.ByHandleFileInformation) ID {
	return ID{
		Dev:   uint64(fi.VolumeSerialNumber),
		Ino:   uint64(fi.FileIndexHigh)<<32 | uint64(fi.FileIndexLow),
		Mtime: fi.LastWriteTime.Nanoseconds(),
		Birth: fi.CreationTime.Nanoseconds(),
	}
}
