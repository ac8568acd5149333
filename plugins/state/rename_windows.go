package state

import (
	"os"

	"golang.org/x/sys/windows"
)

// replaceFile renames oldpath to newpath, replacing newpath, and returns
// once the move is on disk (MOVEFILE_WRITE_THROUGH): Windows has no
// directory fsync.
func replaceFile(oldpath, newpath string) error {
	return moveFile(oldpath, newpath, windows.MOVEFILE_REPLACE_EXISTING|windows.MOVEFILE_WRITE_THROUGH)
}

// renameNoReplace renames oldpath to newpath unless newpath exists, in
// which case the error matches fs.ErrExist (ERROR_ALREADY_EXISTS).
func renameNoReplace(oldpath, newpath string) error {
	return moveFile(oldpath, newpath, windows.MOVEFILE_WRITE_THROUGH)
}

func moveFile(oldpath, newpath string, flags uint32) error {
	from, err := windows.UTF16PtrFromString(oldpath)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	to, err := windows.UTF16PtrFromString(newpath)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	if err := windows.MoveFileEx(from, to, flags); err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	return nil
}
